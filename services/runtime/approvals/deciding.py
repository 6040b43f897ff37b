"""A person's decision on a parked action, from any surface: the decision is recorded on the
approval by compare-and-set (the first one stands; a second answer, a stale approval id, or a
principal not among its approvers is refused and changes nothing), then the request moves from
`awaiting_approval` and the orchestrator is told (`ClarificationAnswered` naming the approval,
under a dedupe key sealed with the deciding role's own login secret, `Bus.own_key`, so that no
other role can publish first under it and have the decision dropped as a duplicate).
A refusal is a `DecisionRefused` (errors.py) whose message is for the person; each surface
says it in its own shape.

A decision that comes after the approval's `expires_at` (or is stored after it: records.py)
is refused as `DecisionExpired`, and the request goes on at once as the sweep would move it:
declined, the worker told the approval expired."""

from __future__ import annotations

import logging

from contracts import ClarificationAnswered, ClarificationRequested, RequestRecord
from contracts.approvals import Approval
from services.runtime.approvals.errors import (
    ApprovalClosed,
    ApprovalExpired,
    DecisionExpired,
    DecisionUnavailable,
    NotAnApprover,
    NotDecidable,
)
from services.runtime.approvals.questions import approval_text, said, said_late, verdict_of
from services.runtime.approvals.records import Approvals, expired_text
from services.runtime.bus.core import Bus, msg_id
from services.runtime.requests.lifecycle import IllegalMove, Tracked, records
from services.runtime.requests.sessions import answered, update_session

log = logging.getLogger("sidekick.approvals")


def waiting_on(record: RequestRecord) -> Approval | None:
    """The approval a request's record says it waits on, if any."""
    outcome = record.outcome
    if isinstance(outcome, ClarificationRequested) and outcome.approval is not None:
        return outcome.approval
    return None


async def decide(
    bus: Bus, principal: str, tracked: Tracked, words: str, approval_id: str | None
) -> RequestRecord:
    """Record `principal`'s decision (`words`) on the request's open approval and resume it."""
    record = tracked.value
    request_id = record.request_id
    approval = waiting_on(record)
    if approval is None:
        raise NotDecidable(f"Request {request_id} is not waiting for an approval.")
    if approval_id is not None and approval_id != approval.approval_id:
        raise NotDecidable(
            f"Approval {approval_id} is not the one request {request_id} waits for "
            f"({approval.approval_id})."
        )
    verdict = verdict_of(words)
    store = Approvals(bus.kv.approvals)
    late: str | None = None  # why the decision came too late, when it did
    try:
        decided = await store.decide(approval.approval_id, principal, verdict)
    except NotAnApprover as exc:
        if approval.approver == "operator":
            raise NotDecidable(
                f"Approval {approval.approval_id} is decided by an operator, not by you."
            ) from exc
        raise NotDecidable(f"You may not decide approval {approval.approval_id}.") from exc
    except ApprovalExpired as exc:
        decided, late = exc.current, str(exc)
    except ApprovalClosed as exc:
        last = exc.current.decisions[-1] if exc.current.decisions else None
        # The same person's retry of a decision whose request did not move on yet: go on.
        if last is None or last.by != principal or last.decision != verdict:
            raise NotDecidable(f"Not decided again: {exc}.") from exc
        decided = await _counted(store, exc.current)
        if decided.state == "expired":  # that decision was stored too late
            late = expired_text(decided)
    except KeyError as exc:
        raise NotDecidable(f"Approval {approval.approval_id} is not open.") from exc
    except Exception as exc:
        raise DecisionUnavailable("The approval store is unavailable; please retry.") from exc
    parked = tracked.revision
    try:
        tracked = await records(bus).move(
            request_id,
            "decided",
            known=tracked,
            source="awaiting_approval",
            clarification_questions=[],
            approvals=[*record.approvals, decided],
        )
    except IllegalMove as exc:
        if late is not None:  # the sweep moved it on already, as declined
            raise NotDecidable(f"Not decided: {late}.") from exc
        now = exc.current.value.status if exc.current is not None else "gone"
        raise NotDecidable(
            f"Request {request_id} is not waiting for an approval (it is {now})."
        ) from exc
    event = ClarificationAnswered(
        request_id=request_id,
        session_id=record.session_id,
        message=decided.state,
        approval_id=decided.approval_id,
    )
    try:
        await bus.publish(
            event,
            bus.subjects.request_answered,
            dedupe_key=bus.own_key(msg_id(request_id, "answered", parked)),
        )
    except Exception as exc:
        log.warning("request %s: could not pass on the approval: %r", request_id, exc)
        raise DecisionUnavailable("Sidekick could not pass on the decision; please retry.") from exc
    answer = said(verdict) if late is None else said_late(verdict)
    try:
        await update_session(
            bus,
            record.session_id,
            lambda rec: answered(rec, request_id, record.text, approval_text(decided), answer),
        )
    except Exception as exc:  # the decision is on its way; only the history lacks it
        log.warning("could not add the decision of %s to its session: %r", request_id, exc)
    if late is not None:  # refused, but the request goes on as declined
        raise DecisionExpired(
            f"Not decided: {late}. The request goes on without it.", tracked.value
        )
    return tracked.value


async def _counted(store: Approvals, stored: Approval) -> Approval:
    """`stored`, decided, as it counts (a decision stored after its expiry does not)."""
    try:
        counted = await store.counted(stored.approval_id)
    except Exception as exc:
        raise DecisionUnavailable("The approval store is unavailable; please retry.") from exc
    return counted if counted is not None else stored
