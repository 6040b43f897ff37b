"""How a request ends (or parks), whichever service ends it: publish the event (deduplicated),
keep it in the results bucket, update the request's status and the session's record (history,
parked request, results not yet seen by a client)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import nats.js.errors

from contracts import (
    FINAL_STATUSES,
    ClarificationRequested,
    RequestCancelled,
    RequestCompleted,
    RequestFailed,
    RequestStatus,
    SessionRecord,
    Turn,
    WorkflowStatus,
    parse_event,
    utcnow,
)
from services.runtime.bus import Bus, msg_id
from services.runtime.kvstore import get_model, key_for, mutate, put_if
from services.runtime.metrics import REQUEST_DURATION, REQUESTS
from services.runtime.telemetry import current_trace_id

MAX_STORED_TURNS = 50
MAX_UNDELIVERED = 50

Outcome = RequestCompleted | RequestFailed | RequestCancelled | ClarificationRequested


async def load_session(bus: Bus, session_id: str) -> SessionRecord:
    record, _ = await get_model(bus.kv.sessions, key_for(session_id), SessionRecord)
    return record or SessionRecord()


async def load_history(bus: Bus, session_id: str, turns: int) -> list[Turn]:
    if turns <= 0:
        return []
    # A "turn" is one user message and its answer.
    return (await load_session(bus, session_id)).turns[-2 * turns :]


async def update_session(
    bus: Bus, session_id: str, change: Callable[[SessionRecord], SessionRecord | None]
) -> SessionRecord | None:
    return await mutate(
        bus.kv.sessions,
        key_for(session_id),
        SessionRecord,
        lambda cur: change(cur or SessionRecord()),
    )


def _session_after(
    record: SessionRecord, event: Outcome, user_message: str
) -> SessionRecord | None:
    rid = event.request_id
    turns = list(record.turns)
    if isinstance(event, RequestCompleted) and not any(t.request_id == rid for t in turns):
        turns.append(Turn(role="user", content=user_message, request_id=rid))
        turns.append(Turn(role="assistant", content=event.output, request_id=rid))
    parked = record.parked
    if isinstance(event, ClarificationRequested):
        parked = rid
    elif parked == rid:
        parked = None
    undelivered = [r for r in record.undelivered if r != rid] + [rid]
    updated = record.model_copy(
        update={
            "turns": turns[-MAX_STORED_TURNS:],
            "parked": parked,
            "undelivered": undelivered[-MAX_UNDELIVERED:],
        }
    )
    return None if updated == record else updated


async def update_status(bus: Bus, request_id: str, **changes: Any) -> RequestStatus | None:
    """Change fields of a request's status record (created by the gateway at acceptance)."""

    def change(cur: RequestStatus | None) -> RequestStatus | None:
        if cur is None:
            return None
        return cur.model_validate({**cur.model_dump(), **changes, "updated_at": utcnow()})

    return await mutate(bus.kv.status, request_id, RequestStatus, change)


async def record_step(
    bus: Bus, request_id: str, status: WorkflowStatus, detail: str
) -> RequestStatus | None:
    """A worker's step into a request that is still under way; a late or repeated step (every
    gateway replica hears it) changes nothing."""

    def change(cur: RequestStatus | None) -> RequestStatus | None:
        if cur is None or cur.status in FINAL_STATUSES:
            return None
        if (cur.status, cur.detail) == (status, detail):
            return None
        return cur.model_copy(update={"status": status, "detail": detail, "updated_at": utcnow()})

    return await mutate(bus.kv.status, request_id, RequestStatus, change)


def _labels(event: RequestCompleted | RequestFailed | RequestCancelled) -> tuple[str, str]:
    if isinstance(event, RequestCompleted):
        return event.status, event.route
    if isinstance(event, RequestFailed):
        return "failed", "none"
    return "cancelled", "none"


def _subject(bus: Bus, event: Outcome) -> str:
    s, rid = bus.subjects, event.request_id
    if isinstance(event, RequestCompleted):
        return s.request_completed(rid)
    if isinstance(event, RequestFailed):
        return s.request_failed(rid)
    if isinstance(event, RequestCancelled):
        return s.request_cancelled(rid)
    return s.request_clarification(rid)


def _status_changes(event: Outcome) -> dict[str, Any]:
    if isinstance(event, ClarificationRequested):
        return {
            "status": "awaiting_clarification",
            "clarification_questions": [q.model_dump() for q in event.questions],
        }
    done: dict[str, Any] = {
        "completed_at": utcnow(),
        "clarification_questions": [],
        "trace_id": event.trace_id,
    }
    if isinstance(event, RequestCompleted):
        return {
            **done,
            "status": event.status,
            "final_output": event.output,
            "cached": event.route == "cached",
            "worker_type": event.worker_type,
        }
    if isinstance(event, RequestFailed):
        return {**done, "status": "failed", "error": event.error}
    return {**done, "status": "cancelled", "error": event.reason}


async def _claim(bus: Bus, event: Outcome) -> Outcome:
    """Store the outcome unless the request already ended; return the outcome that stands.
    A clarification may be replaced (the request resumes later); a terminal event may not, so
    the first one wins even when two services race (e.g. a cancel and a finishing stream)."""
    kv = bus.kv.results
    for _ in range(20):
        try:
            entry = await kv.get(event.request_id)
            current: Outcome | None = _parse_outcome(entry.value) if entry.value else None
            revision = entry.revision or 0
        except nats.js.errors.KeyNotFoundError:
            current, revision = None, 0
        if current is not None and not isinstance(current, ClarificationRequested):
            return current
        data = event.model_dump_json().encode()
        try:
            if revision == 0:
                await kv.create(event.request_id, data)
            else:
                await kv.update(event.request_id, data, last=revision)
            return event
        except (nats.js.errors.KeyWrongLastSequenceError, nats.js.errors.BadRequestError):
            continue
    raise RuntimeError(f"could not store the outcome of {event.request_id} (contention)")


def _parse_outcome(data: bytes) -> Outcome | None:
    event = parse_event(data)
    if isinstance(event, RequestCompleted | RequestFailed | RequestCancelled):
        return event
    if isinstance(event, ClarificationRequested):
        return event
    return None


async def finish(bus: Bus, event: Outcome, *, user_message: str) -> Outcome:
    """End (or park) a request and return the outcome that stands. Safe to call twice and from
    racing services: the first terminal outcome wins, every write is idempotent, and the
    publish is deduplicated by the server (a parked request's event has its own key)."""
    terminal = isinstance(event, RequestCompleted | RequestFailed | RequestCancelled)
    if terminal and event.trace_id is None:  # type: ignore[union-attr]
        event = event.model_copy(update={"trace_id": current_trace_id()})
    winner = await _claim(bus, event)
    status = await update_status(bus, winner.request_id, **_status_changes(winner))
    await update_session(
        bus, winner.session_id, lambda rec: _session_after(rec, winner, user_message)
    )
    if winner is event and not isinstance(event, ClarificationRequested):
        outcome, route = _labels(event)
        REQUESTS.labels(outcome, route).inc()
        if status is not None:
            took = (utcnow() - status.created_at).total_seconds()
            REQUEST_DURATION.labels(outcome, route).observe(took)
    step = f"clarify:{winner.event_id}" if isinstance(winner, ClarificationRequested) else "final"
    key = msg_id(winner.request_id, step)
    # The stream drops a duplicate publish, but core subscribers (gateways) would still see it,
    # so a re-run (a redelivery, a late event) publishes only what was never published.
    if await _published(bus, key):
        return winner
    await bus.publish(winner, _subject(bus, winner), dedupe_key=key)
    await bus.kv.ledger.put(_published_key(key), b"1")
    return winner


def _published_key(dedupe_key: str) -> str:
    return "published." + key_for(dedupe_key)


async def _published(bus: Bus, dedupe_key: str) -> bool:
    try:
        await bus.kv.ledger.get(_published_key(dedupe_key))
    except nats.js.errors.KeyNotFoundError:
        return False
    return True


async def is_finished(bus: Bus, request_id: str) -> bool:
    """True once a terminal event for the request has been stored."""
    try:
        entry = await bus.kv.results.get(request_id)
    except nats.js.errors.KeyNotFoundError:
        return False
    if not entry.value:
        return False
    return not isinstance(_parse_outcome(entry.value), ClarificationRequested)


async def create_status(bus: Bus, status: RequestStatus) -> bool:
    """Record a newly accepted request; False if a record already exists (a retried id)."""
    return await put_if(bus.kv.status, status.request_id, status, 0)


async def load_status(bus: Bus, request_id: str) -> RequestStatus | None:
    status, _ = await get_model(bus.kv.status, request_id, RequestStatus)
    return status
