"""How a request ends (or parks), whichever service ends it: record the outcome on the
request's record (the first end stands), update the session's record (history, parked request,
results not yet seen by a client, the session's lane), publish the outcome to the gateways
once (by the call that recorded it: the lifecycle's compare-and-set lets one call do that), and
on its push subject too when the record says a client is notified of it (`push`: A2A push
notifications, services/gateway/a2a/push.py), and then start the session's next queued request
(services/runtime/requests/lanes.py)."""

from __future__ import annotations

import contextlib
from typing import Any

from contracts import (
    ClarificationRequested,
    Outcome,
    RequestCompleted,
    RequestFailed,
    RequestState,
    SessionRecord,
    WorkflowStatus,
)
from services.runtime.base.metrics import REQUEST_DURATION, REQUESTS
from services.runtime.base.telemetry import current_trace_id
from services.runtime.bus.core import Bus, msg_id, redelivered
from services.runtime.bus.kvstore import Versioned
from services.runtime.requests import lanes
from services.runtime.requests.lifecycle import IllegalMove, Tracked, records
from services.runtime.requests.sessions import after_outcome, write_session


async def record_step(bus: Bus, request_id: str, status: WorkflowStatus, detail: str) -> None:
    """A worker's step (researching, synthesizing, ...) into a request that is still in its
    attempt. Workers may not touch request records (they would see other requests' answers),
    so the gateway records the step from the worker's progress event; a late or repeated step
    (every gateway replica hears it) changes nothing."""
    with contextlib.suppress(IllegalMove):
        await records(bus).move(request_id, "working", status=status, detail=detail)


def _labels(event: Outcome) -> tuple[str, str]:
    if isinstance(event, RequestCompleted):
        return event.status, event.route
    if isinstance(event, RequestFailed):
        return "failed", "none"
    return "cancelled", "none"


def _subject(bus: Bus, event: Outcome) -> str:
    s, rid, sid = bus.subjects, event.request_id, event.session_id
    if isinstance(event, RequestCompleted):
        return s.request_completed(rid, sid)
    if isinstance(event, RequestFailed):
        return s.request_failed(rid, sid)
    if isinstance(event, ClarificationRequested):
        return s.request_clarification(rid, sid)
    return s.request_cancelled(rid, sid)


def _step(event: Outcome) -> str:
    return f"clarify:{event.event_id}" if isinstance(event, ClarificationRequested) else "final"


def end_key(event: Outcome, seal: str, step: str = "") -> str:
    """The dedupe key `event` is stored with (`step`: a prefix, `push.` on the push subject):
    the same from every role that may publish it (the gateway, the frontline, the
    orchestrator: after a crash, or racing, each stores it under this key, so the stream keeps
    one copy), and sealed with the request's `seal` (its record's secret), so a role that does
    not read the request's record (a worker knows its id) cannot store a message first under
    it and have the end dropped as a duplicate. No seal (a record made before it existed, or an
    orphan outcome with no record): the plain key."""
    key = msg_id(event.request_id, step + _step(event))
    return f"{key}:{seal}" if seal else key


async def push(bus: Bus, event: Outcome, seal: str) -> None:
    """The outcome on its request's push subject too (`<ns>.push.<request>.<what>`), for a
    request a client is notified of: the PUSH stream keeps it until the gateways' `push`
    consumer has POSTed it. Whoever publishes it (the call that recorded it, or the gateway
    that set `push` on a request already ended) uses the same dedupe key (`seal`: the request
    record's): stored once."""
    what = _subject(bus, event).rsplit(".", 1)[1]
    key = end_key(event, seal, "push.")
    await bus.publish(event, bus.subjects.push(event.request_id, what), dedupe_key=key)


async def finish(
    bus: Bus,
    event: Outcome,
    *,
    known: Tracked | None = None,
    session: Versioned[SessionRecord] | None = None,
    via: tuple[RequestState, ...] = (),
    changes: dict[str, Any] | None = None,
) -> Outcome | None:
    """End (or park) a request and return the outcome that stands, or None when this service
    may not end it from where it is (another service owns that step). Safe to call twice and
    from racing services: the first end wins, every write is idempotent, and the outcome is
    published by the call that recorded it. A call that finds the request already ended
    publishes nothing, unless it handles a redelivered message: the first delivery's handler
    may have died between recording and publishing (the stream drops a second copy; a gateway
    shows an outcome once per socket). `known`/`session` are the request's and the session's
    records as last read, if the caller has them (saves a read when they are current); `via`
    and `changes`: the states the end may pass through and more fields of the record, in the
    same write (`Requests.settle`)."""
    if not isinstance(event, ClarificationRequested) and event.trace_id is None:
        event = event.model_copy(update={"trace_id": current_trace_id()})
    due: str | None = None
    session_now: Versioned[SessionRecord] | None = None
    pushed = False  # a client is notified of it (the record's `push`, as this write found it)
    seal = ""  # the record's (none for an orphan outcome)
    try:
        ended, moved = await records(bus).settle(event, known=known, via=via, **(changes or {}))
    except IllegalMove as exc:
        if exc.current is not None:
            return None
        # No record at all (an orphan message, not accepted by a gateway): nothing to keep,
        # but whoever waits for this request still hears how it ended.
        winner: Outcome = event
        moved = True
    else:
        record = ended.value
        pushed, seal = record.push, record.seal
        if record.outcome is None:  # cannot happen: settle() stores an outcome with each end
            return None
        winner = record.outcome
        if not moved and not redelivered():
            return winner
        # Before the outcome is published: a gateway that shows it marks it seen in the
        # session right after.
        now = await write_session(
            bus,
            winner.session_id,
            lambda rec: after_outcome(rec, winner, record.text),
            known=session,
        )
        if now is not None and now.value.active and now.value.handoff == winner.request_id:
            due, session_now = now.value.active, now  # this end gave the session to the next
        if moved and not isinstance(event, ClarificationRequested):
            outcome, route = _labels(event)
            REQUESTS.labels(outcome, route).inc()
            took = (record.updated_at - record.created_at).total_seconds()
            REQUEST_DURATION.labels(outcome, route).observe(took)
    await bus.publish(winner, _subject(bus, winner), dedupe_key=end_key(winner, seal))
    if pushed:
        await push(bus, winner, seal)
    if due is not None:  # after the end is out, so no client sees the next one's first
        await lanes.start(bus, due, session_now)
    return winner
