"""The orchestrator's I/O for a request waiting on an approval: open the approval in the
`approvals` bucket before the request parks on it, find it decided (by a person's answer, or
on the sweep when the gateway recorded a decision but never passed it on), and expire it when
its time runs out (a person's decision that came first stands). Each decision is also an event
on the request's trace."""

from __future__ import annotations

import logging

from opentelemetry import trace

from contracts import ClarificationAnswered, utcnow
from contracts.approvals import Approval
from services.runtime.approvals.errors import ApprovalClosed
from services.runtime.approvals.records import Approvals
from services.runtime.bus.core import Bus

log = logging.getLogger("sidekick.approvals")


async def open_approval(bus: Bus, approval: Approval) -> Approval:
    opened = await Approvals(bus.kv.approvals).open(approval)
    trace.get_current_span().add_event(
        "approval asked",
        {
            "sidekick.approval_id": opened.approval_id,
            "sidekick.action": opened.action,
            "sidekick.digest": opened.digest,
        },
    )
    return opened


async def expire(bus: Bus, approval: Approval) -> Approval:
    """Decline the approval for want of an answer; the approval as it now stands."""
    try:
        expired = await Approvals(bus.kv.approvals).decide(
            approval.approval_id, "sidekick", "expired"
        )
    except ApprovalClosed as exc:
        return exc.current
    except KeyError:  # never opened (the request parked on it was lost): nothing to decline
        log.warning("request %s: approval %s not found", approval.request_id, approval.approval_id)
        return approval
    trace.get_current_span().add_event(
        "approval expired",
        {"sidekick.approval_id": expired.approval_id, "sidekick.digest": expired.digest},
    )
    return expired


async def load_decided(bus: Bus, event: ClarificationAnswered) -> Approval | None:
    """The approval a person's answer decided, as it counts (a decision stored after its
    expiry is the expiry); None, with a warning, when it is not there."""
    assert event.approval_id is not None
    found = await Approvals(bus.kv.approvals).counted(event.approval_id)
    if found is None:
        log.warning("request %s: no approval %s", event.request_id, event.approval_id)
    return found


async def decided_unpassed(bus: Bus, approval_id: str, grace: float) -> Approval | None:
    """The approval a parked request waits on, when a person decided it over `grace` seconds
    ago and the request is still parked: the gateway recorded the decision but stopped before
    passing it on. None while it is pending (or was decided just now: it is on its way)."""
    found = await Approvals(bus.kv.approvals).counted(approval_id)
    if found is None or found.state == "pending" or not found.decisions:
        return None
    last = found.decisions[-1]
    if (utcnow() - last.at).total_seconds() < grace:
        return None
    log.info(
        "request %s: approval %s was %s by %s but not passed on; resuming it",
        found.request_id,
        approval_id,
        last.decision,
        last.by,
    )
    return found
