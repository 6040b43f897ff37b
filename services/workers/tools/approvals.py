"""The operator's approval policy for the TOOLS worker's consequential tools, asked before each
call (the tool loop's `guard`).

Which action a call is: `notify`; `python_run`; `<server>__<tool>` for an MCP server's tool
(the name the model calls it by); and `browser.new_domain` for a `browser_navigate` to a host
not yet opened in this run (tools/hosts.py says what a host is; the gate's `hosts` are the
run's, and a host counts as opened once the gate let a navigation to it run). Every other way
to a new host (a click, a form, a script, a redirect, a pop-up) is stopped by the browser
itself under `ask` or `deny` (tools/navgate.py), and the model is told to call
`browser_navigate`, which comes here. The other tools (files, Wikipedia, web search, the rest
of the browser) are never asked about.

The policy's ruling on the action decides:
- `allow`: the call runs.
- `deny`: it does not; the model gets a tool result saying the operator's policy forbids it.
- `ask`: nothing runs and the loop stops; the worker returns an `ApprovalAsk` with the call's
  arguments as strings (`shown_arguments`) and their digest, and the request parks.

On a later attempt (after the decision) the same call finds its approval: the one the task
names, or, since an approval's id is fixed by (request, attempt, digest), one of this call's
digest asked at an earlier attempt of the request (so several approvals of one request hold).
An approved call runs, claimed in the ledger under `<action>.approved.<approval id>` first, so
a redelivered task, a second replica or a later attempt replays its recorded outcome and never
runs it again (a claim left `started` by a worker that died mid-call is not repeated either:
at most once). A `browser.new_domain` approval is for opening a host, not an effect to do
once, so it is not claimed. Arguments with another digest ask anew: an approval is never used
for anything but what was approved. A built-in tool's arguments are checked first, so no one is
asked about a call that could not run.
A decline or an expiry of the approval the task names (or of this call's digest) is a tool
result saying so, for every call of that action in the attempt, and the loop goes on.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import nats.errors
from nats.js.kv import KeyValue

from contracts import WorkerTask
from contracts.approvals import Approval, ApprovalAsk, digest_of
from services.runtime.requests.approvals import Approvals, approval_id
from services.workers.ledger import Effect, Ledger
from services.workers.policy import Policy, Ruling
from services.workers.tools.errors import ToolArgumentsError
from services.workers.tools.hosts import NEW_DOMAIN, Hosts, host_of
from services.workers.tools.toolbox import Call, Outcome, ToolBox, parse_arguments

NAVIGATE = "browser_navigate"
# Built-in tools whose every call is an action of the policy (named as the policy names it).
GATED = {"notify": "notify", "python_run": "python_run"}
# How long past a tool's own time limit a claim left `started` counts as a worker that died.
CLAIM_MARGIN = 15.0


def shown_value(value: Any) -> str:
    """One argument as the text a person reads and the digest binds: a string as it is, unless
    it reads as JSON (then it is quoted, so "1" and 1 never look alike); anything else as
    canonical JSON. Two different arguments never show the same."""
    if isinstance(value, str):
        try:
            json.loads(value)
        except ValueError:
            return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def shown_arguments(arguments: str) -> dict[str, str]:
    """The model's arguments (a JSON object) as strings; ToolArgumentsError if not an object."""
    return {key: shown_value(value) for key, value in parse_arguments(arguments).items()}


def declined_text(approval: Approval) -> str:
    """The tool result of a call whose approval was declined or expired."""
    shown = "; ".join(f"{k}: {_short(v)}" for k, v in sorted(approval.arguments.items()))
    if approval.state == "expired":
        last = approval.decisions[-1] if approval.decisions else None
        when = f" at {last.at.isoformat(timespec='seconds')}" if last else ""
        return (
            f"{approval.action} was not run ({shown}): no one approved it before the approval "
            f"expired{when}, so it counts as declined. Do not try it again; answer without it."
        )
    return (
        f"The user declined to run {approval.action} ({shown}); it was not run. Do not try "
        "it again; answer without it."
    )


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + " …"


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
    ) -> None:
        self.policy = policy
        self.task = task
        self.approvals = approvals  # the buckets, looked up only when a call needs them
        self.ledger = ledger
        self.mcp_names = mcp_names
        self.time_limit = time_limit  # seconds a call of the action may take
        # The run's opened hosts, shared with its browser (the worker puts them on the run).
        self.hosts = Hosts(policy.ruling(NEW_DOMAIN))
        self._found: dict[str, Approval | None] = {}

    def action_of(self, name: str, arguments: str) -> str | None:
        """The policy's name for this call, or None when the policy has no say over it."""
        if name in GATED:
            return GATED[name]
        if name in self.mcp_names:
            return name
        if name == NAVIGATE:
            host = self._host(arguments)
            return NEW_DOMAIN if host is not None and host not in self.hosts.opened else None
        return None

    async def __call__(
        self, toolbox: ToolBox, name: str, arguments: str, call: Call
    ) -> Outcome | ApprovalAsk:
        action = self.action_of(name, arguments)
        if action is None:
            return await self._run(toolbox, name, arguments, call)
        ruling = self.policy.ruling(action)
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
            shown = self._arguments(action, arguments)
        except ToolArgumentsError as exc:
            return Outcome(f"ERROR: {exc}", ok=False)
        digest = digest_of(action, shown)
        decided = await self._decided(action, digest)
        if decided is not None and decided.state == "approved":
            return await self._run_approved(decided, toolbox, name, arguments, call)
        if decided is not None:
            return Outcome(declined_text(decided), ok=False)
        return self._ask(action, shown, digest, ruling, arguments)

    def _ask(
        self, action: str, shown: dict[str, str], digest: str, ruling: Ruling, arguments: str
    ) -> Outcome | ApprovalAsk:
        reason = ruling.reason
        if action == NEW_DOMAIN:
            url = parse_arguments(arguments).get("url")
            reason = f"the browser would open {url}, on a host not opened in this run; {reason}"
        named = self._found.get(self.task.approval_id or "")
        if named is not None and named.action == action:
            if named.state != "approved":  # declined: the action is off for this attempt
                return Outcome(declined_text(named), ok=False)
            reason = f"these are not the arguments of {action} that were approved; {reason}"
        return ApprovalAsk(
            action=action,
            arguments=shown,
            digest=digest,
            reason=reason,
            approver=ruling.approver,
        )

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

    async def _decided(self, action: str, digest: str) -> Approval | None:
        """The decided approval of this request for exactly this action and digest (asked at
        an earlier attempt), the latest first; None when there is none."""
        task = self.task
        ids = [approval_id(task.request_id, n, digest) for n in range(task.attempt - 1, 0, -1)]
        if task.approval_id is not None:  # the named one first: its decline covers the action
            ids.insert(0, task.approval_id)
        for candidate in ids:
            found = await self._load(candidate)
            if found is not None and found.action == action and found.digest == digest:
                return found
        return None

    async def _load(self, key: str) -> Approval | None:
        if key not in self._found:
            versioned = await Approvals(self.approvals()).load(key)
            approval = versioned.value if versioned is not None else None
            if approval is not None and (
                approval.request_id != self.task.request_id or approval.state == "pending"
            ):
                approval = None
            self._found[key] = approval
        return self._found[key]

    async def _run(self, toolbox: ToolBox, name: str, arguments: str, call: Call) -> Outcome:
        if name == NAVIGATE:  # let through: opened before it runs, so the browser lets it go
            host = self._host(arguments)
            if host is not None:
                self.hosts.opened.add(host)
        return await toolbox.call(name, arguments, call)

    async def _run_approved(
        self, approval: Approval, toolbox: ToolBox, name: str, arguments: str, call: Call
    ) -> Outcome:
        if approval.action == NEW_DOMAIN:
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
