"""Approvals in the `approvals` bucket (key: approval id): opened by the orchestrator when a
worker asks, decided once by compare-and-set (by the gateway for a person, by the orchestrator
when it expires), read by the worker that then acts. The first decision stands: a second
answer, a racing one, or one after expiry finds the approval closed and changes nothing
(`ApprovalClosed`; `NotAnApprover` for a principal who may not decide it: errors.py).

Expiry is part of the compare-and-set, not only the orchestrator's sweep: a person's decision
is taken only on an approval read pending and not yet past `expires_at`; one that comes later
writes the expiry instead (`ApprovalExpired`), whether or not the sweep has run. And since a
decision can still land late (the decider paused between its check and its write, the bus slow
to take it), the time that counts is the NATS server's stamp on the stored decision: one
stored after `expires_at` is turned into the expiry by the decider that wrote it, and every
worker reads it as expired (`Approvals.counted`), so it is never acted on.

Also the `parked` bucket's entry of a parked request (`Parked`): its deadline, and the approval
it waits on, if any."""

from __future__ import annotations

from datetime import datetime
from typing import Literal, NamedTuple

from nats.js.kv import KeyValue

from contracts import utcnow
from contracts.approvals import Approval, ApprovalDecision
from services.runtime.approvals.errors import ApprovalClosed, ApprovalExpired, NotAnApprover
from services.runtime.bus.kvstore import Versioned, get_model, get_stamped, key_for, write_if

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
        not pending any more, ApprovalExpired when a person's decision comes after its
        `expires_at` (or is stored after it: the expiry is written in its place),
        NotAnApprover when `by` may not decide it (an expiry is decided by 'sidekick'),
        KeyError when there is no such approval."""
        key = key_for(approval_id)
        for _ in range(ATTEMPTS):
            current = await self.load(approval_id)
            if current is None:
                raise KeyError(approval_id)
            approval = current.value
            if verdict != "expired" and by not in approval.approvers:
                raise NotAnApprover(approval, f"{by} may not decide this approval")
            if approval.state != "pending":
                if approval.state == "expired":
                    raise ApprovalExpired(approval, expired_text(approval))
                raise ApprovalClosed(approval, closed_text(approval))
            by_person = verdict != "expired"
            too_late = by_person and utcnow() >= approval.expires_at
            if too_late:  # the expiry is written instead, whether or not the sweep ran
                decided = expired(approval)
            else:
                decision = ApprovalDecision(decision=verdict, by=by, digest=approval.digest)
                decided = approval.model_copy(
                    update={"state": verdict, "decisions": [*approval.decisions, decision]}
                )
            revision = await write_if(self.kv, key, decided, current.revision)
            if revision is None:
                continue  # someone else wrote first: read again
            if too_late:
                raise ApprovalExpired(decided, expired_text(decided))
            if by_person and not await self._stored_in_time(key, revision, approval.expires_at):
                # Stored after its expiry: the expiry is written over it. Should that write
                # fail, every reader still counts the decision as the expiry (`counted`).
                late = expired(approval)
                if await write_if(self.kv, key, late, revision) is None:
                    late = in_time(decided, None)
                raise ApprovalExpired(late, expired_text(late))
            return decided
        raise RuntimeError(f"could not decide approval {approval_id} (contention)")

    async def _stored_in_time(self, key: str, revision: int, expires_at: datetime) -> bool:
        """Whether the write at `revision` was stored before `expires_at` (the server's stamp;
        a write the server stamps no time on, or that another write replaced, is not)."""
        stamped = await get_stamped(self.kv, key, Approval)
        return (
            stamped is not None
            and stamped.revision == revision
            and stamped.stored_at is not None
            and stamped.stored_at < expires_at
        )

    async def counted(self, approval_id: str) -> Approval | None:
        """The approval as it counts, for a worker to act on or a request to resume with: as
        stored, except that a decision the server stored after the approval's `expires_at`
        counts as its expiry (it is never acted on, whoever wrote it and however)."""
        stamped = await get_stamped(self.kv, key_for(approval_id), Approval)
        if stamped is None:
            return None
        return in_time(stamped.value, stamped.stored_at)

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


def expired(approval: Approval) -> Approval:
    """A pending approval, expired (decided by 'sidekick', now)."""
    decision = ApprovalDecision(decision="expired", by="sidekick", digest=approval.digest)
    return approval.model_copy(
        update={"state": "expired", "decisions": [*approval.decisions, decision]}
    )


def in_time(approval: Approval, stored_at: datetime | None) -> Approval:
    """`approval`, stored at `stored_at` (the server's stamp), as it counts: a person's
    decision stored at or after its `expires_at` (or at a time unknown) is its expiry."""
    if approval.state in ("pending", "expired"):
        return approval
    if stored_at is not None and stored_at < approval.expires_at:
        return approval
    decision = ApprovalDecision(
        decision="expired", by="sidekick", at=approval.expires_at, digest=approval.digest
    )
    return approval.model_copy(
        update={"state": "expired", "decisions": [*approval.decisions, decision]}
    )


def expired_text(approval: Approval) -> str:
    """Why a person's decision on an expired approval is not taken."""
    at = approval.expires_at.isoformat(timespec="seconds")
    return (
        f"approval {approval.approval_id} expired at {at}, before this decision: it counts as "
        "declined, and the action was not done"
    )


def closed_text(approval: Approval) -> str:
    last = approval.decisions[-1] if approval.decisions else None
    if last is None:
        return f"approval {approval.approval_id} is {approval.state}"
    return (
        f"approval {approval.approval_id} was already {last.decision} by {last.by} "
        f"at {last.at.isoformat(timespec='seconds')}"
    )
