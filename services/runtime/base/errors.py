"""Errors of the shared runtime.

SidekickError
 +-- ConfigurationError          a setting is missing or wrong; names the variables to set
 |    +-- LLMNotConfigured
 +-- LLMError                    a model call failed after its retries (and its fallback's)
 |    +-- LLMUnavailable         network error, timeout, 429 or 5xx persisted; or a 4xx
 |    +-- LLMInvalidOutput       the reply failed validation twice (names role, model, mode)
 |    +-- BudgetSpent            the next call was not made: its maximum could pass the budget
 +-- PoisonMessage               a bus message that can never be processed (bad JSON/schema)
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
