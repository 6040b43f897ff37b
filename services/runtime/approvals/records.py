"""Approvals in the `approvals` bucket (key: approval id): opened by the orchestrator when a
worker asks, decided once by compare-and-set (by the gateway for a person, by the orchestrator
when it expires), read by the worker that then acts. The first decision stands: a second
answer, a racing one, or one after expiry finds the approval closed and changes nothing
(`ApprovalClosed`; `NotAnApprover` for a principal who may not decide it: errors.py).

Also the `parked` bucket's entry of a parked request (`Parked`): its deadline, and the approval
it waits on, if any."""

from __future__ import annotations

from typing import Literal, NamedTuple

from nats.js.kv import KeyValue

from contracts import utcnow
from contracts.approvals import Approval, ApprovalDecision
from services.runtime.approvals.errors import ApprovalClosed, NotAnApprover
from services.runtime.bus.kvstore import Versioned, get_model, key_for, write_if

ATTEMPTS = 20
Verdict = Literal["approved", "denied", "expired"]


class Parked(NamedTuple):
    """An entry of the `parked` bucket (key: request id): "<deadline> [<approval id>]"."""

    deadline: float
    approval_id: str | None

    def encode(self) -> bytes:
        return (f"{self.deadline}" + (f" {self.approval_id}" if self.approval_id else "")).encode()

    @classmethod
    def decode(cls, raw: bytes | None) -> Parked:
        """ValueError when it is not a parked entry."""
        deadline, _, approval_id = (raw or b"").decode().partition(" ")
        return cls(float(deadline), approval_id.strip() or None)


def approval_id(request_id: str, attempt: int, digest: str) -> str:
    """Deterministic, so a redelivered result opens the same approval, not a second one."""
    return key_for(f"{request_id}:{attempt}:{digest}")[:32]


class Approvals:
    def __init__(self, kv: KeyValue) -> None:
        self.kv = kv

    async def load(self, approval_id: str) -> Versioned[Approval] | None:
        found, revision = await get_model(self.kv, key_for(approval_id), Approval)
        return Versioned(found, revision) if found is not None else None

    async def open(self, approval: Approval) -> Approval:
        """Store a new approval; the stored one when it exists already (a redelivery)."""
        key = key_for(approval.approval_id)
        for _ in range(ATTEMPTS):
            if await write_if(self.kv, key, approval, 0) is not None:
                return approval
            current = await self.load(approval.approval_id)
            if current is not None:
                return current.value
        raise RuntimeError(f"could not open approval {approval.approval_id} (contention)")

    async def decide(self, approval_id: str, by: str, verdict: Verdict) -> Approval:
        """Record the one decision on a pending approval. Raises ApprovalClosed when it is
        not pending any more, NotAnApprover when `by` may not decide it (an expiry is
        decided by 'sidekick'), KeyError when there is no such approval."""
        for _ in range(ATTEMPTS):
            current = await self.load(approval_id)
            if current is None:
                raise KeyError(approval_id)
            approval = current.value
            if verdict != "expired" and by not in approval.approvers:
                raise NotAnApprover(approval, f"{by} may not decide this approval")
            if approval.state != "pending":
                raise ApprovalClosed(approval, closed_text(approval))
            decision = ApprovalDecision(decision=verdict, by=by, digest=approval.digest)
            decided = approval.model_copy(
                update={"state": verdict, "decisions": [*approval.decisions, decision]}
            )
            key = key_for(approval_id)
            if await write_if(self.kv, key, decided, current.revision) is not None:
                return decided
        raise RuntimeError(f"could not decide approval {approval_id} (contention)")

    async def expire_if_due(self, approval_id: str) -> Approval | None:
        """Expire a pending approval past its time; the approval as it stands after."""
        current = await self.load(approval_id)
        if current is None:
            return None
        if current.value.state != "pending" or current.value.expires_at > utcnow():
            return current.value
        try:
            return await self.decide(approval_id, "sidekick", "expired")
        except ApprovalClosed as exc:
            return exc.current


def closed_text(approval: Approval) -> str:
    last = approval.decisions[-1] if approval.decisions else None
    if last is None:
        return f"approval {approval.approval_id} is {approval.state}"
    return (
        f"approval {approval.approval_id} was already {last.decision} by {last.by} "
        f"at {last.at.isoformat(timespec='seconds')}"
    )
