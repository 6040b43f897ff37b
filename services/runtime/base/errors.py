"""`SidekickError`, and every error class of the project under it, drawn once, here.

Paths are under `services/`. A section line (` |  path`) says where the classes below it live;
a class that lives elsewhere starts its note with its path (a file name alone: in the section's
folder); a child lives with its parent unless it says otherwise. "Also a ValueError" (or
RuntimeError): it keeps that built-in base too, so every `except ValueError` that caught it
still does. `tests/docs/test_architecture.py` checks the drawing against the code.

SidekickError                        everything Sidekick raises on purpose
 |
 |  runtime/base/errors.py
 +-- ConfigurationError              a setting is missing or wrong; names what to set
 |    +-- LLMNotConfigured           no endpoint for a role; the message says what to set
 |    +-- PolicyError                runtime/approvals/policy.py: the approval policy cannot be used
 |    |                              (where and why); also a ValueError
 |    +-- McpConfigError             workers/tools/mcp_config.py: the MCP servers' file
 |    |                              (SIDEKICK_MCP_CONFIG) cannot be used
 |    +-- AuthConfigError            gateway/core/errors.py: the token configuration cannot be
 |                                   used; also a ValueError
 +-- LLMError                        a model call failed after its retries (and its fallback's)
 |    +-- LLMUnavailable             network error, timeout, 429 or 5xx persisted; or a 4xx
 |    +-- LLMInvalidOutput           the reply failed validation twice (names role, model, mode)
 |    +-- BudgetSpent                the next call was not made: its maximum could pass the budget
 +-- PoisonMessage                   a bus message that can never be processed (bad JSON/schema)
 |
 |  runtime/walls/
 +-- EgressRefused                   egress.py: a destination that is not public
 +-- TooDeep                         jsonlimits.py: JSON nested too deep; also a ValueError
 |
 |  runtime/llm/
 +-- CallTimeout                     calls.py: a whole attempt ran past SIDEKICK_LLM_TIMEOUT
 +-- StreamError                     sse.py: an error inside a stream, or an unreadable event
 |
 |  runtime/bus/topology.py
 +-- TopologyMissing                 the bootstrap step has not run; also a RuntimeError
 |
 |  runtime/requests/
 +-- IllegalMove                     lifecycle.py: the table does not allow this move
 +-- Busy                            lanes.py: `reject`: the session answers another request
 |
 |  runtime/approvals/errors.py
 +-- ApprovalRefused                 the store wrote no decision (records.py); `.current` is it
 |    +-- ApprovalClosed             already decided (or expired); `.current` says how
 |    |    +-- ApprovalExpired       its time ran out before the decision was stored
 |    +-- NotAnApprover              the deciding principal is not among its approvers
 +-- DecisionRefused                 a person's decision was not taken (deciding.py)
 |    +-- NotDecidable               none waits, another does, not theirs, or decided already
 |    |    +-- DecisionExpired       it expired first; the request goes on as declined
 |    +-- UnclearAnswer              the words say neither yes nor no
 |    +-- DecisionUnavailable        the store or the bus did not answer; a retry may
 |
 |  runtime/budgets/
 +-- OverBudget                      meter.py: the step does not fit; carries the `Limit`
 +-- AccountsUnavailable             admission.py: the `budgets` bucket could not be read
 |
 |  gateway/core/errors.py           what the gateway refuses: code, message, http_status
 +-- GatewayError                    a refusal; an error frame, or an HTTP status and body
 |    +-- Unauthorized               401 unauthorized: no token, or a wrong one
 |    +-- Invalid                    422 invalid_body: the body fails validation
 |    |    +-- TooLarge              413 invalid_body: the body is over the size limit
 |    +-- NotFound                   404 not_found: unknown id, or another principal's
 |    +-- Conflict                   409 conflict: e.g. not awaiting clarification, id in use
 |    |    +-- Expired               approving.py: a decision after the approval expired (the
 |    |                              request goes on, declined)
 |    +-- Busy                       409 busy: `reject`: the session answers another request
 |    +-- RateLimited                429 rate_limited: per-minute limit or concurrency cap
 |    +-- Unavailable                503 unavailable: the bus did not take the message
 +-- RpcError                        gateway/a2a/errors.py: an A2A error, its JSON-RPC code
 |
 |  workers/errors.py                the worker kinds that call outside services
 +-- WorkerError                     carries `retryable`: may the same attempt succeed re-run?
 |    +-- SearchError                Brave Search could not give results
 |    |    +-- SearchNotConfigured   BRAVE_SEARCH_API_KEY is not set (never retryable)
 |    |    +-- SearchUnavailable     429, 5xx, timeout or network error (retryable)
 |    |    +-- SearchRejected        any other error status (bad key, bad query; not retryable)
 |    +-- EmailError                 an email could not be built or sent
 |         +-- InvalidRecipient      not an address, or a domain that is not allowed
 |         +-- EmailNotConfigured    a key without SENDGRID_FROM_EMAIL
 |         +-- EmailSendFailed       SendGrid refused or failed; `retryable` when it surely
 |         |                         did not send (5xx, 429, connection refused)
 |         +-- EmailOutcomeUnknown   a send may or may not have happened (timeout, a crash
 |                                   mid-send); never retried: the mail goes out at most once
 |
 |  workers/tools/                   errors a tool reports to the model: its result, the loop
 |                                   goes on; the message says what went wrong and what to do
 +-- ToolError                       errors.py: a tool could not do what was asked
 |    +-- ToolNotConfigured          the tool's key or binary is missing; names what to set
 |    +-- ToolArgumentsError         the model's arguments were not valid JSON or off the schema
 |    +-- PathRefused                a files_* path would leave the session's folder
 |    +-- ToolUnavailable            the outside service failed (timeout, 5xx, unreachable)
 |    +-- _Missing                   sessiondir.py: a files_* path that does not exist
 +-- McpStartError                   mcp_link.py: an MCP server could not be connected
 |
 |  cli/
 +-- LocalModelMissing               localmodel.py: the `local` extra is not installed; also a
 |                                   RuntimeError
 +-- GatewayRefused                  outbox.py: the gateway answered `sidekick outbox` with an
 |                                   error status
 +-- GatewayRefused                  inspecting.py: the gateway refused `sidekick inspect` or
 |                                   `replay` (or could not be reached); says why
 |
 |  evals/
 +-- CasesError                      cases.py: a case file that cannot be used (line, why)
 +-- PricesError                     report.py: a `--prices` or `--compare` file it cannot use
"""

from __future__ import annotations

from contracts import Usage


class SidekickError(Exception):
    """Base of every error Sidekick raises on purpose."""


class ConfigurationError(SidekickError):
    pass


# The shared variables to set and an example, in the words every surface uses (also
# `sidekick doctor`, which adds each role's own variables).
MODEL_VARIABLES = (
    "SIDEKICK_LLM_BASE_URL, SIDEKICK_LLM_MODEL and, if the server needs one, "
    "SIDEKICK_LLM_API_KEY (or just OPENAI_API_KEY for OpenAI)"
)
MODEL_EXAMPLE = (
    "for example `SIDEKICK_LLM_BASE_URL=http://127.0.0.1:11434/v1 SIDEKICK_LLM_MODEL=llama3.1 "
    "sidekick up` for Ollama"
)


def no_model_message() -> str:
    """What every surface says when no model is configured (chat, the page, event and legacy
    WebSocket clients, the OpenAI-compatible endpoint, the `sidekick up` banner): one sentence,
    the variables to set, an example, and where to check."""
    return (
        f"No model is configured yet: set {MODEL_VARIABLES} before `sidekick up`, "
        f"{MODEL_EXAMPLE}, then run `sidekick doctor` to check it."
    )


class LLMNotConfigured(ConfigurationError):
    """No endpoint for `role` (its own SIDEKICK_<ROLE>_LLM_*, the shared SIDEKICK_LLM_* and
    OPENAI_* are all unset); the message is `no_model_message()`."""

    def __init__(self, role: str) -> None:
        self.role = role
        super().__init__(no_model_message())


class LLMError(SidekickError):
    def __init__(self, role: str, model: str, message: str) -> None:
        self.role = role
        self.model = model
        super().__init__(message)


class LLMUnavailable(LLMError):
    def __init__(
        self,
        role: str,
        model: str,
        message: str,
        *,
        transient: bool = True,
        status: int | None = None,
    ) -> None:
        # transient: the endpoint failed (5xx, 429, timeout, refused), so a fallback may help;
        # otherwise it answered "no" (4xx), which another try of the same request would repeat.
        self.transient = transient
        self.status = status  # the HTTP status, when the server answered
        super().__init__(role, model, message)


class LLMInvalidOutput(LLMError):
    def __init__(self, role: str, model: str, message: str, raw: str, mode: str = "") -> None:
        self.raw = raw
        self.mode = mode
        super().__init__(role, model, message)


class BudgetSpent(LLMError):
    """The caller's budget guard refused the next HTTP call (a first call, a structured reply's
    repair, a fallback's): `note` names the limit, `usage` is what the calls already made in
    this one client call used (to be counted: they happened)."""

    def __init__(self, role: str, model: str, note: str, usage: Usage) -> None:
        self.note = note
        self.usage = usage
        super().__init__(role, model, f"The {role} model's next call was not made: {note}")


class PoisonMessage(SidekickError):
    def __init__(self, subject: str, reason: str) -> None:
        self.subject = subject
        self.reason = reason
        super().__init__(f"poison message on {subject}: {reason}")


# Every error a model call can end in, for `except MODEL_ERRORS`.
MODEL_ERRORS: tuple[type[SidekickError], ...] = (LLMError, LLMNotConfigured)
