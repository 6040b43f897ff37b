"""The TOOLS worker's approval gate: the operator's approval policy for its consequential
tools, asked before each call (the tool loop's `guard`).

Which action a call is: `notify`; `python_run`; `<server>__<tool>` for an MCP server's tool
(the name the model calls it by); `<name>` for one of the client's own tools (AG-UI frontend
tools: let through, a call is handed off to the client, tools/frontend.py); and
`browser.new_domain` for a `browser_navigate` to a host not yet opened in this run
(tools/hosts.py says what a host is; the gate's `hosts` are the run's, and a host counts as
opened once the gate let a navigation to it run). Every other way
to a new host (a click, a form, a script, a redirect, a pop-up) is stopped by the browser
itself under `ask` or `deny` (tools/navgate.py), and the model is told to call
`browser_navigate`, which comes here. The other tools (files, Wikipedia, web search, the rest
of the browser) are never asked about.

The policy's ruling on the action decides:
- `allow`: the call runs.
- `deny`: it does not; the model gets a tool result saying the operator's policy forbids it.
- `ask`: nothing runs and the loop stops; the worker returns an `ApprovalAsk` with the call's
  arguments as strings (`shown_arguments`) and their digest, and the request parks.

On a later attempt (after the decision) the same call finds its approval, and a decline covers
every call of its action in the attempt (services/runtime/approvals/gate.py says how). An
approved call runs, claimed in the ledger under `<action>.approved.<approval id>` first, so
a redelivered task, a second replica or a later attempt replays its recorded outcome and never
runs it again (a claim left `started` by a worker that died mid-call is not repeated either:
at most once). A `browser.new_domain` approval is for opening a host, not an effect to do
once, so it is not claimed. A built-in tool's arguments are checked first, so no one is asked
about a call that could not run.
"""

from __future__ import annotations

from collections.abc import Callable

import nats.errors
from nats.js.kv import KeyValue

from contracts import WorkerTask
from contracts.approvals import Approval, ApprovalAsk, digest_of
from contracts.frontend import ToolCall
from services.runtime.approvals.gate import Gate, declined_text, shown
from services.runtime.approvals.policy import Policy, Ruling
from services.runtime.requests.replays import is_replay, would_have
from services.workers.ledger import Effect, Ledger
from services.workers.tools.errors import ToolArgumentsError
from services.workers.tools.frontend import HandOff
from services.workers.tools.hosts import NEW_DOMAIN, Hosts, host_of
from services.workers.tools.toolbox import Call, Outcome, ToolBox, parse_arguments

NAVIGATE = "browser_navigate"
# The tools a replay runs (reads); every other call, and any the policy has a say over (a new
# browser host too), is only shown as what would have been done: a tool added later is refused
# in a replay until it is named here.
REPLAY_READS = frozenset(
    {
        "web_search",
        "wikipedia_search",
        "wikipedia_page",
        "files_list",
        "files_read",
        "browser_navigate",
        "browser_text",
        "browser_links",
    }
)
# Built-in tools whose every call is an action of the policy (named as the policy names it).
GATED = {"notify": "notify", "python_run": "python_run"}
# How long past a tool's own time limit a claim left `started` counts as a worker that died.
CLAIM_MARGIN = 15.0


def shown_arguments(arguments: str) -> dict[str, str]:
    """The model's arguments (a JSON object) as strings; ToolArgumentsError if not an object."""
    return shown(parse_arguments(arguments))


class ToolGate:
    """One task's approvals: made per run, called by the tool loop in place of the toolbox."""

    def __init__(
        self,
        policy: Policy,
        task: WorkerTask,
        *,
        approvals: Callable[[], KeyValue],
        ledger: Callable[[], KeyValue],
        mcp_names: frozenset[str],
        time_limit: Callable[[str], float],
        frontend_names: frozenset[str] = frozenset(),
    ) -> None:
        self.policy = policy
        self.task = task
        self.gate = Gate(policy, task, approvals)  # the approvals bucket, read when needed
        self.ledger = ledger
        self.mcp_names = mcp_names
        self.frontend_names = frontend_names  # the client's own tools: handed off, not run
        self.time_limit = time_limit  # seconds a call of the action may take
        # The run's opened hosts, shared with its browser (the worker puts them on the run).
        self.hosts = Hosts(policy.ruling(NEW_DOMAIN))

    def action_of(self, name: str, arguments: str) -> str | None:
        """The policy's name for this call, or None when the policy has no say over it."""
        if name in GATED:
            return GATED[name]
        if name in self.mcp_names or name in self.frontend_names:
            return name
        if name == NAVIGATE:
            host = self._host(arguments)
            return NEW_DOMAIN if host is not None and host not in self.hosts.opened else None
        return None

    async def __call__(
        self, toolbox: ToolBox, name: str, arguments: str, call: Call
    ) -> Outcome | ApprovalAsk:
        action = self.action_of(name, arguments)
        if is_replay(self.task) and (action is not None or name not in REPLAY_READS):
            # A replay does nothing in the world: only reads run; the rest is shown.
            return Outcome(would_have(action or name, arguments), ok=True)
        if action is None:
            return await self._run(toolbox, name, arguments, call)
        ruling = self.gate.ruling(action)
        if ruling.decision == "allow":
            return await self._run(toolbox, name, arguments, call)
        if ruling.decision == "deny":
            return Outcome(
                f"ERROR: the operator's approval policy forbids {action} ({ruling.reason}); "
                "it was not run.",
                ok=False,
            )
        refused = toolbox.refusal(name, arguments)
        if refused is not None:  # it could not run: no one is asked about it
            return Outcome(refused, ok=False)
        try:
            as_shown = self._arguments(action, arguments)
        except ToolArgumentsError as exc:
            return Outcome(f"ERROR: {exc}", ok=False)
        digest = digest_of(action, as_shown)
        decided = await self.gate.decided(action, digest)
        if decided is not None and decided.state == "approved":
            return await self._run_approved(decided, toolbox, name, arguments, call)
        declined = decided or self.gate.declined(action)  # the action is off for this attempt
        if declined is not None:
            return Outcome(declined_text(declined), ok=False)
        reason = self._reason(action, arguments, ruling)
        return self.gate.ask(action, as_shown, digest, ruling, reason)

    def _reason(self, action: str, arguments: str, ruling: Ruling) -> str:
        if action != NEW_DOMAIN:
            return ruling.reason
        url = parse_arguments(arguments).get("url")
        return f"the browser would open {url}, on a host not opened in this run; {ruling.reason}"

    def _arguments(self, action: str, arguments: str) -> dict[str, str]:
        if action == NEW_DOMAIN:  # the approval is for the host; the URL is in the reason
            return {"domain": self._host(arguments) or ""}
        return shown_arguments(arguments)

    def _host(self, arguments: str) -> str | None:
        try:
            url = parse_arguments(arguments).get("url")
        except ToolArgumentsError:
            return None
        return host_of(url) if isinstance(url, str) else None

    async def _run(self, toolbox: ToolBox, name: str, arguments: str, call: Call) -> Outcome:
        if name in self.frontend_names:  # the client runs it, with arguments it can read
            try:
                parse_arguments(arguments)
            except ToolArgumentsError as exc:
                return Outcome(f"ERROR: {exc}", ok=False)
            return HandOff.of(ToolCall(call_id=call.call_id, name=name, arguments=arguments))
        if name == NAVIGATE:  # let through: opened before it runs, so the browser lets it go
            host = self._host(arguments)
            if host is not None:
                self.hosts.opened.add(host)
        return await toolbox.call(name, arguments, call)

    async def _run_approved(
        self, approval: Approval, toolbox: ToolBox, name: str, arguments: str, call: Call
    ) -> Outcome:
        if approval.action == NEW_DOMAIN or name in self.frontend_names:
            # Opening a host is no effect to do once; a client's tool runs at the client, and
            # its result resumes the request once (services/gateway/core/answers.py).
            return await self._run(toolbox, name, arguments, call)
        key = f"{approval.action}.approved.{approval.approval_id}"
        ledger = Ledger(self.ledger(), stale_after=self.time_limit(approval.action) + CLAIM_MARGIN)
        try:
            prior = await ledger.claim(key)
        except nats.errors.Error as exc:
            return Outcome(
                f"ERROR: {approval.action} was not run: the idempotency ledger could not be "
                f"written ({exc!r}).",
                ok=False,
            )
        if prior is not None:
            return replayed(approval.action, prior)
        outcome = await self._run(toolbox, name, arguments, call)
        effect = (
            Effect(state="succeeded", output=outcome.content)
            if outcome.ok
            else Effect(state="failed", output=outcome.content, error=outcome.content)
        )
        await ledger.record(key, effect)
        return outcome


def replayed(action: str, prior: Effect) -> Outcome:
    """An approved call that already ran (or began to): what it did, not run again."""
    if prior.state == "succeeded":
        note = f"(This approved {action} call already ran; it was not run again.)"
        return Outcome(f"{prior.output}\n{note}", ok=True)
    if prior.state == "failed":
        return Outcome(prior.output or f"ERROR: {prior.error}", ok=False)
    return Outcome(
        f"ERROR: this approved {action} call may or may not have run: an earlier delivery of "
        "the same task stopped during it. It is not run again, to avoid a duplicate.",
        ok=False,
    )
