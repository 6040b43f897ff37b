"""A session's record in the `sessions` bucket: its turns (the history the agents see), the
request parked waiting for its answers, and results no client of the session has seen yet."""

from __future__ import annotations

from collections.abc import Callable

from contracts import Outcome, Question, RequestCompleted, SessionRecord, Turn, utcnow
from contracts.events import ClarificationRequested
from services.runtime.bus.core import Bus
from services.runtime.bus.kvstore import Versioned, get_model, key_for, mutate_versioned
from services.runtime.requests.lanes import ended

MAX_STORED_TURNS = 50
MAX_UNDELIVERED = 50


async def load_session(bus: Bus, session_id: str) -> SessionRecord:
    return (await load_versioned(bus, session_id)).value


async def load_versioned(bus: Bus, session_id: str) -> Versioned[SessionRecord]:
    """The session's record and its revision (0: none yet)."""
    record, revision = await get_model(bus.kv.sessions, key_for(session_id), SessionRecord)
    return Versioned(record or SessionRecord(), revision)


def recent(record: SessionRecord, turns: int) -> list[Turn]:
    """The last `turns` turns (a turn is one user message and its answer)."""
    return record.turns[-2 * turns :] if turns > 0 else []


async def update_session(
    bus: Bus,
    session_id: str,
    change: Callable[[SessionRecord], SessionRecord | None],
    *,
    known: Versioned[SessionRecord] | None = None,
) -> SessionRecord | None:
    """Change the session's record by compare-and-set (from `known` first, when the caller has
    just read it: one round trip instead of two while nobody wrote in between)."""
    done = await write_session(bus, session_id, change, known=known)
    return done.value if done is not None else None


async def write_session(
    bus: Bus,
    session_id: str,
    change: Callable[[SessionRecord], SessionRecord | None],
    *,
    known: Versioned[SessionRecord] | None = None,
) -> Versioned[SessionRecord] | None:
    """`update_session`, returning the record with its revision (None: there is none)."""
    return await mutate_versioned(
        bus.kv.sessions,
        key_for(session_id),
        SessionRecord,
        lambda cur: change(cur or SessionRecord()),
        known=known,
    )


def after_outcome(record: SessionRecord, event: Outcome, user_message: str) -> SessionRecord | None:
    """The session once `event` ended (or parked) one of its requests: the turn added, the
    parked request set or cleared, the request noted as not yet seen by a client, and, when it
    ended (or parked, in a session whose requests park aside), the session's next queued request
    made active (services/runtime/requests/lanes.py)."""
    rid = event.request_id
    original = record
    turns = list(record.turns)
    if isinstance(event, RequestCompleted):
        # Its user turn may be there already, with the questions it asked and their answers.
        own = [t for t in turns if t.request_id == rid]
        if not own:
            turns.append(Turn(role="user", content=user_message, request_id=rid))
        if not own or own[-1] != Turn(role="assistant", content=event.output, request_id=rid):
            turns.append(Turn(role="assistant", content=event.output, request_id=rid))
    parked = record.parked
    if isinstance(event, ClarificationRequested):
        parked = rid
        if record.parked_aside:  # it waits outside the lane: the next request runs meanwhile
            record = ended(record, rid, utcnow())
    else:
        if parked == rid:
            parked = None
        record = ended(record, rid, utcnow())
    undelivered = [r for r in record.undelivered if r != rid] + [rid]
    updated = record.model_copy(
        update={
            "turns": turns[-MAX_STORED_TURNS:],
            "parked": parked,
            "undelivered": undelivered[-MAX_UNDELIVERED:],
        }
    )
    return None if updated == original else updated


def asked_text(questions: list[Question]) -> str:
    """The questions of a parked request, as one assistant message."""
    lines = "\n".join(f"- {q.question}" for q in questions)
    return f"I need a little more information before I go on:\n{lines}"


def answered(
    record: SessionRecord, request_id: str, user_message: str, asked: str, answer: str
) -> SessionRecord | None:
    """The session once the user answered a parked request's questions: the request, the
    questions and the answer become turns (so the conversation reads as it happened, and the
    agents see it in the history)."""
    turns = list(record.turns)
    if not any(t.request_id == request_id for t in turns):
        turns.append(Turn(role="user", content=user_message, request_id=request_id))
    turns.append(Turn(role="assistant", content=asked, request_id=request_id))
    turns.append(Turn(role="user", content=answer, request_id=request_id))
    return record.model_copy(update={"turns": turns[-MAX_STORED_TURNS:]})


def mark_delivered(record: SessionRecord, request_ids: list[str]) -> SessionRecord | None:
    """The session once a client has seen these requests' results."""
    undelivered = [r for r in record.undelivered if r not in request_ids]
    if undelivered == record.undelivered:
        return None
    return record.model_copy(update={"undelivered": undelivered})
