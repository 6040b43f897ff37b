"""The worker's side of approvals, for one task: the policy's ruling on an action, the decided
approval of exactly this action and these arguments, and the ask when there is none.

An action's arguments are shown as strings (`shown`), and the approval is bound to their digest.
On a later attempt (after the decision) the same action finds its approval: the one the task
names, or, since an approval's id is fixed by (request, attempt, digest), one of its digest
asked at an earlier attempt of the request (so several approvals of one request hold).
Arguments with another digest ask anew: an approval is never used for anything but what was
approved. A decline or an expiry of the approval the task names is a decline for every call of
that action in the attempt (`declined`); the worker says so (`declined_text`) and goes on. An
approval is read as it counts: a decision the NATS server stored after the approval's expiry
is its expiry, never acted on, however it got there (records.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from nats.js.kv import KeyValue

from contracts import WorkerTask
from contracts.approvals import Approval, ApprovalAsk
from services.runtime.approvals.policy import Policy, Ruling
from services.runtime.approvals.records import Approvals, approval_id


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


def shown(arguments: dict[str, Any]) -> dict[str, str]:
    """Arguments as the strings a person reads and the digest binds."""
    return {key: shown_value(value) for key, value in arguments.items()}


def declined_text(approval: Approval) -> str:
    """What a worker says of an action whose approval was declined or expired."""
    shown_ = "; ".join(f"{k}: {_short(v)}" for k, v in sorted(approval.arguments.items()))
    if approval.state == "expired":
        last = approval.decisions[-1] if approval.decisions else None
        when = f" at {last.at.isoformat(timespec='seconds')}" if last else ""
        return (
            f"{approval.action} was not run ({shown_}): no one approved it before the approval "
            f"expired{when}, so it counts as declined. Do not try it again; answer without it."
        )
    return (
        f"The user declined to run {approval.action} ({shown_}); it was not run. Do not try "
        "it again; answer without it."
    )


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + " …"


class Gate:
    """One task's approvals: the approvals bucket is looked up only when an action needs it,
    and each approval read once per task."""

    def __init__(self, policy: Policy, task: WorkerTask, approvals: Callable[[], KeyValue]) -> None:
        self.policy = policy
        self.task = task
        self.approvals = approvals
        self._found: dict[str, Approval | None] = {}

    def ruling(self, action: str) -> Ruling:
        return self.policy.ruling(action)

    async def decided(self, action: str, digest: str) -> Approval | None:
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

    def declined(self, action: str) -> Approval | None:
        """The approval the task names, when it is of `action` and was not approved: the
        action is off for this attempt (known once `decided` has read it)."""
        named = self._named(action)
        return named if named is not None and named.state != "approved" else None

    def ask(
        self, action: str, arguments: dict[str, str], digest: str, ruling: Ruling, reason: str
    ) -> ApprovalAsk:
        """The ask for a person's approval of `action` with `arguments` (shown), and why."""
        named = self._named(action)
        if named is not None and named.state == "approved":
            reason = f"these are not the arguments of {action} that were approved; {reason}"
        return ApprovalAsk(
            action=action,
            arguments=arguments,
            digest=digest,
            reason=reason,
            approver=ruling.approver,
        )

    def _named(self, action: str) -> Approval | None:
        named = self._found.get(self.task.approval_id or "")
        return named if named is not None and named.action == action else None

    async def _load(self, key: str) -> Approval | None:
        if key not in self._found:
            # As it counts: a decision stored after its expiry is the expiry (records.py).
            approval = await Approvals(self.approvals()).counted(key)
            if approval is not None and (
                approval.request_id != self.task.request_id or approval.state == "pending"
            ):
                approval = None
            self._found[key] = approval
        return self._found[key]
