"""The orchestrator's part in approvals, as plain logic: the approval a worker's ask opens (or
why none may be opened: one request asks about one action a few times at most, and for a few
approvals in all), who may decide it, and whether a decision is the one a parked request waits
on. The decision itself is kept in the `approvals` bucket (records.py); the next attempt's
worker acts on it, so what runs is only what was approved."""

from __future__ import annotations

from datetime import timedelta

from contracts import RequestRouted, utcnow
from contracts.approvals import Approval, ApprovalAsk
from services.runtime.approvals.records import approval_id

# Approvals one request may ask for: of one action (a model that changes what it asks after
# each decision is stopped), and in all (several tools, or browser domains, each asking).
MAX_APPROVAL_ROUNDS = 3
MAX_APPROVALS = 8


def refusal(asked: list[Approval], ask: ApprovalAsk) -> str | None:
    """Why the request, having asked for `asked`, may not ask for `ask` too (the error its
    request fails with), or None when it may."""
    same = sum(1 for a in asked if a.action == ask.action)
    if same >= MAX_APPROVAL_ROUNDS:
        return (
            f"Sidekick asked for approval of {ask.action} {same} times in this request, the "
            "most it asks for one action, so it was not done; send the request again."
        )
    if len(asked) >= MAX_APPROVALS:
        return (
            f"This request asked for {len(asked)} approvals, the most one request "
            f"may, so {ask.action} was not done; ask for the rest in a new request."
        )
    return None


def opened(
    req: RequestRouted, ask: ApprovalAsk, attempt: int, ttl: float, operators: tuple[str, ...]
) -> Approval:
    """The approval `ask` opens for attempt `attempt` of `req`, expiring in `ttl` seconds. Its
    principal may decide it (and so may the operators named in SIDEKICK_APPROVERS), unless the
    policy leaves it to operators only."""
    return Approval(
        approval_id=approval_id(req.request_id, attempt, ask.digest),
        request_id=req.request_id,
        attempt=attempt,
        approvers=approvers_of(req.principal, ask, operators),
        approver=ask.approver,
        action=ask.action,
        arguments=ask.arguments,
        digest=ask.digest,
        reason=ask.reason,
        expires_at=utcnow() + timedelta(seconds=ttl),
    )


def approvers_of(principal: str, ask: ApprovalAsk, operators: tuple[str, ...]) -> list[str]:
    if ask.approver == "operator":
        return list(operators)
    return list(dict.fromkeys([principal, *operators]))


def answers(waited: Approval | None, approval: Approval) -> bool:
    """Whether `approval`, decided, is the one a request parked on `waited` waits for
    (anything else is stale and ignored)."""
    return (
        waited is not None
        and waited.approval_id == approval.approval_id
        and approval.state != "pending"
    )
