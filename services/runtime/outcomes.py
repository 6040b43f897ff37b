"""How a request ends, whichever service ends it: publish the terminal event (deduplicated),
keep it in the results bucket for clients that reconnect, and record the turn in the session."""

from __future__ import annotations

import nats.js.errors
from pydantic import Field

from contracts import Model, RequestCompleted, RequestFailed, Turn
from services.runtime.bus import Bus, msg_id
from services.runtime.kvstore import get_model, key_for, mutate
from services.runtime.metrics import REQUESTS

MAX_STORED_TURNS = 50


class SessionHistory(Model):
    """A session's turns, newest last."""

    turns: list[Turn] = Field(default_factory=list, description="The turns.")


async def load_history(bus: Bus, session_id: str, turns: int) -> list[Turn]:
    if turns <= 0:
        return []
    history, _ = await get_model(bus.kv.sessions, key_for(session_id), SessionHistory)
    if history is None:
        return []
    # A "turn" is one user message and its answer.
    return history.turns[-2 * turns :]


async def record_turn(bus: Bus, session_id: str, request_id: str, user: str, answer: str) -> None:
    def change(current: SessionHistory | None) -> SessionHistory | None:
        turns = list(current.turns) if current else []
        if any(t.request_id == request_id for t in turns):
            return None  # a redelivery: already recorded
        turns.append(Turn(role="user", content=user, request_id=request_id))
        turns.append(Turn(role="assistant", content=answer, request_id=request_id))
        return SessionHistory(turns=turns[-MAX_STORED_TURNS:])

    await mutate(bus.kv.sessions, key_for(session_id), SessionHistory, change)


async def finish(bus: Bus, event: RequestCompleted | RequestFailed, *, user_message: str) -> None:
    """End a request. Safe to call twice: the publish is deduplicated, the writes idempotent."""
    subject = (
        bus.subjects.request_completed(event.request_id)
        if isinstance(event, RequestCompleted)
        else bus.subjects.request_failed(event.request_id)
    )
    await bus.kv.results.put(event.request_id, event.model_dump_json().encode())
    if isinstance(event, RequestCompleted):
        await record_turn(bus, event.session_id, event.request_id, user_message, event.output)
        REQUESTS.labels(event.status, event.route).inc()
    else:
        REQUESTS.labels("failed", "none").inc()
    await bus.publish(event, subject, dedupe_key=msg_id(event.request_id, "final"))


async def is_finished(bus: Bus, request_id: str) -> bool:
    """True once a terminal event for the request has been stored."""
    try:
        entry = await bus.kv.results.get(request_id)
    except nats.js.errors.KeyNotFoundError:
        return False
    return bool(entry.value)
