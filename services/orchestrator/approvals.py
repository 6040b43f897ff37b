"""The attempt loop's part in approvals, as plain logic: park the request when a worker asks
to act, and resume it once the approval is decided (approved, declined or expired). The
decision itself is kept in the `approvals` bucket (services/runtime/requests/approvals.py);
the next attempt's worker acts on it, so what runs is only what was approved."""

from __future__ import annotations

from datetime import timedelta

from contracts import RequestFailed, utcnow
from contracts.approvals import Approval, ApprovalAsk
from services.orchestrator.state import MAX_APPROVAL_ROUNDS, MAX_APPROVALS, Attempt, LoopState
from services.runtime.requests.approvals import approval_id


def park(
    state: LoopState, ask: ApprovalAsk, attempt: int, ttl: float, operators: tuple[str, ...] = ()
) -> LoopState:
    """Park the request on a new approval. Its principal may decide it (and so may the
    operators named in SIDEKICK_APPROVERS), unless the policy leaves it to operators only."""
    req = state.request
    same = sum(1 for a in state.approvals if a.action == ask.action)
    error = None
    if same >= MAX_APPROVAL_ROUNDS:
        error = (
            f"Sidekick asked for approval of {ask.action} {same} times in this request, the "
            "most it asks for one action, so it was not done; send the request again."
        )
    elif len(state.approvals) >= MAX_APPROVALS:
        error = (
            f"This request asked for {len(state.approvals)} approvals, the most one request "
            f"may, so {ask.action} was not done; ask for the rest in a new request."
        )
    if error is not None:
        failure = RequestFailed(
            request_id=req.request_id, session_id=req.session_id, code="worker_failed", error=error
        )
        return state.model_copy(update={"status": "failed", "failure": failure})
    approval = Approval(
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
    return state.model_copy(update={"status": "awaiting_approval", "approval": approval})


def approvers_of(principal: str, ask: ApprovalAsk, operators: tuple[str, ...]) -> list[str]:
    if ask.approver == "operator":
        return list(operators)
    return list(dict.fromkeys([principal, *operators]))


def decided(state: LoopState, approval: Approval) -> LoopState:
    """Resume with the decided approval: the next attempt's worker acts on it (sends the
    approved arguments, or reports the decline). Anything else is stale and ignored."""
    waited = state.approval
    if (
        state.status != "awaiting_approval"
        or waited is None
        or waited.approval_id != approval.approval_id
        or approval.state == "pending"
    ):
        return state
    n = len(state.attempts) + 1
    return state.model_copy(
        update={
            "status": "working",
            "approval": None,
            "approvals": [*state.approvals, approval],
            "attempts": [*state.attempts, Attempt(n=n, approval_id=approval.approval_id)],
            "max_attempts": state.max_attempts + 1,
        }
    )
