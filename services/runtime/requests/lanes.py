"""One conversation at a time: a session's requests are answered one after another, never
interleaved, whichever socket or gateway replica each came through.

The order lives on the bus, in the session's record (`sessions` bucket), as its lane:
`active` (the request being answered, or waiting for the user's answers), `queued` (the
requests waiting their turn, oldest first) and `handoff` (which request's end gave the session
to `active`). Every change is a compare-and-set on that one key:

    gateway, new message     claim(): a free session -> the request is `active` (its record is
                             created `accepted` and published); a busy one -> `enqueue` appends
                             it (record `queued`), `reject` refuses it (`Busy`), `interrupt`
                             makes it the only one waiting and cancels the rest
    frontline/orchestrator,  ended(), inside the session update every end already makes
    a request ends           (`outcomes.finish`): the first queued request becomes `active`,
                             and once the end is published, `start()` moves it queued ->
                             accepted and publishes its `chat.requested`

A request parked on the user (a question, an approval) holds the lane, so what comes next waits
for its answer, unless the session's requests park aside (`parked_aside`, set by a claim that
asks for it: A2A, where a context holds several tasks): then parking hands the lane on as an end
does, a new claim finds a parked `active` and steps it aside, and an answered request goes on
outside the lane, beside whatever runs then.

A free session costs nothing extra: the gateway reads the session's record anyway (a parked
question may be answered) and the claim is the one write that reading earns; the end's session
update was already there. A crash is covered: a re-run of an end starts `active` again when
`handoff` names it (the publish is deduplicated), and a claim older than `STALE` whose request
never got a record, or whose request has ended, no longer holds the session.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, get_args

from opentelemetry import context, trace

from contracts import ChatRequested, RequestRecord, RequestRouted, SessionRecord, Turn, utcnow
from contracts.base import IfBusy, RecordStamp, SessionStamp
from services.runtime.base.errors import SidekickError
from services.runtime.base.telemetry import current_trace_id
from services.runtime.bus.core import Bus, msg_id
from services.runtime.bus.kvstore import Versioned, get_model, key_for, write_if
from services.runtime.requests.lifecycle import PARKED, STATUS, IllegalMove, Tracked, records

IF_BUSY: tuple[IfBusy, ...] = get_args(IfBusy)
STALE = timedelta(seconds=60)
ATTEMPTS = 20
# The most characters of turns a session may hold to travel with its request as a whole (a
# larger one goes as its recent turns, and the end's write reads it first).
STAMP_CHARS = 64_000

tracer = trace.get_tracer("sidekick.lanes")

Session = Versioned[SessionRecord]

# A request's options, named alike in the gateway's submission, the request's record and the
# events that carry it on (`chat.requested`, `request.routed`): each is made from the one before
# by these names (`options`); OWNED adds whose request it is.
OPTIONS = (
    "request_id",
    "success_criteria",
    "use_evaluator",
    "skip_cache",
    "planned",
    "preferences",
    "history",
    "frontend_tools",
    "context",
    "replay",
)
OWNED = (*OPTIONS, "session_id", "principal")
# What a request's stamp (`RecordStamp`) keeps of its record, under the record's names.
STAMPED = ("created_at", "updated_at", "trace_id", "seal")


class Busy(SidekickError):
    """`reject`: the session is answering another request."""

    def __init__(self, active: str) -> None:
        super().__init__(active)
        self.active = active


@dataclass(frozen=True)
class Claim:
    """Where a new request stands in its session after the claim."""

    session: Session
    behind: str | None  # the request it waits for (None: it runs now)
    position: int  # 0 runs now; n: n-th in the queue
    cancel: tuple[str, ...]  # interrupt: the requests to cancel
    start: str | None  # a queued request the claim found due (its predecessor was stale)


def ended(record: SessionRecord, request_id: str, now: datetime) -> SessionRecord:
    """The lane once `request_id` has ended: out of the queue, and if it was active, the first
    queued request is active now, handed off by it."""
    queued = [r for r in record.queued if r != request_id]
    if record.active != request_id:
        return record.model_copy(update={"queued": queued})
    nxt = queued.pop(0) if queued else None
    return record.model_copy(
        update={
            "active": nxt,
            "active_since": now if nxt else None,
            "queued": queued,
            "handoff": request_id if nxt else None,
        }
    )


def claimed(
    record: SessionRecord, request_id: str, mode: IfBusy, now: datetime
) -> tuple[SessionRecord, int, tuple[str, ...]]:
    """The lane with `request_id` in it: (record, position, requests to cancel)."""
    if record.active is None:
        update = {"active": request_id, "active_since": now, "handoff": None}
        return record.model_copy(update=update), 0, ()
    if mode == "reject":
        raise Busy(record.active)
    if mode == "interrupt":
        cancel = (record.active, *record.queued)
        return record.model_copy(update={"queued": [request_id]}), 1, cancel
    queued = [*record.queued, request_id]
    return record.model_copy(update={"queued": queued}), len(queued), ()


async def load(bus: Bus, session_id: str) -> Session:
    record, revision = await get_model(bus.kv.sessions, key_for(session_id), SessionRecord)
    return Versioned(record or SessionRecord(), revision)


async def claim(
    bus: Bus,
    session_id: str,
    request_id: str,
    mode: IfBusy,
    known: Session | None = None,
    delivered: list[str] | tuple[str, ...] = (),
    aside: bool = False,
) -> Claim:
    """Put a new request in its session's lane (compare-and-set, from `known` when the caller
    has just read the session), noting in the same write the results a client has seen
    (`delivered`). `aside`: the session's parked requests step out of the lane, from now on
    and the one parked now. Raises Busy for `reject` when the session is busy."""
    for _ in range(ATTEMPTS):
        fresh = known is None
        session = known if known is not None else await load(bus, session_id)
        known = None
        lane, start = session.value, None
        now = utcnow()
        busy = lane.active is not None and lane.active != request_id
        if busy and await _stale(bus, lane, now, aside=aside):
            assert lane.active is not None
            lane = ended(lane, lane.active, now)
            start = lane.active
        if aside and not lane.parked_aside:
            lane = lane.model_copy(update={"parked_aside": True})
        if request_id in (lane.active, *lane.queued):  # a retried claim that was written
            return Claim(session, None, 0, (), None)
        if delivered:
            lane = lane.model_copy(
                update={"undelivered": [r for r in lane.undelivered if r not in delivered]}
            )
        try:
            updated, position, cancel = claimed(lane, request_id, mode, now)
        except Busy:
            if fresh:
                raise
            continue  # busy on the caller's copy: the session may be free by now (kvstore.py)
        revision = await write_if(bus.kv.sessions, key_for(session_id), updated, session.revision)
        if revision is not None:
            behind = None if position == 0 else updated.active
            return Claim(Versioned(updated, revision), behind, position, cancel, start)
    raise RuntimeError(f"could not queue a request in session {session_id} (contention)")


async def _stale(bus: Bus, lane: SessionRecord, now: datetime, *, aside: bool) -> bool:
    """Whether the active request no longer holds the session: it ended (its end never
    reached the lane), its record never appeared, or (`aside`) it is parked on the user."""
    assert lane.active is not None
    tracked = await records(bus).load(lane.active)
    if tracked is None:
        since = lane.active_since or now
        return now - since > STALE
    return tracked.value.ended or (aside and tracked.value.state in PARKED)


def request_of(
    tracked: Tracked, session_turns: list[Turn] | None = None, session: Session | None = None
) -> ChatRequested:
    """The request's `chat.requested`, from its record (and the revision it has: its stamp,
    so the frontline need not read it), with the session's record and revision when given
    (`session`: the frontline neither reads the session for its history nor before its end's
    write), else with its recent turns when given."""
    record = tracked.value
    stamp = RecordStamp(
        revision=tracked.revision, digest=digest(record), **options(record, STAMPED)
    )
    held = None
    if session is not None and session.revision > 0:
        held, session_turns = SessionStamp(revision=session.revision, record=session.value), None
    return ChatRequested(
        message=record.text,
        session_turns=session_turns,
        session=held,
        record=stamp,
        **options(record),
    )


def options(source: object, names: tuple[str, ...] = OWNED) -> dict[str, Any]:
    """`source`'s values of `names`: a request's options and whose it is, by default."""
    return {name: getattr(source, name) for name in names}


def small(session: SessionRecord) -> bool:
    """Whether a session's record is small enough to travel with its request (`SessionStamp`)."""
    return sum(len(turn.content) for turn in session.turns) <= STAMP_CHARS


def digest(record: RequestRecord) -> str:
    return hashlib.sha256(record.model_dump_json().encode()).hexdigest()[:32]


def record_from(req: ChatRequested | RequestRouted) -> Tracked | None:
    """The request's record as it stood when the gateway sent `req` on (a `chat.requested`, or
    the `request.routed` the frontline made of it), from `req` and its stamp; None when `req`
    has no stamp or the record made from it is not the one stamped (the caller reads the
    record then; a routed request's record is rebuilt without the client's own turns, so one
    that had them is read). A copy: a write started from it fails if the record moved since."""
    stamp = req.record
    if stamp is None:
        return None
    history = req.history if isinstance(req, ChatRequested) else []
    record = RequestRecord(
        **options(req) | {"text": req.message, "history": history},
        **options(stamp, STAMPED),
        state="accepted",
        status=STATUS["accepted"],
    )
    if not hmac.compare_digest(digest(record), stamp.digest):
        return None
    return Versioned(record, stamp.revision)


async def publish(
    bus: Bus,
    tracked: Tracked,
    session_turns: list[Turn] | None = None,
    session: Session | None = None,
) -> None:
    """Send an accepted request on its way (deduplicated: safe to repeat), with the session's
    record as just written when the caller has it (`session`), else its recent turns when the
    caller has them."""
    if session is not None and not small(session.value):
        # Sent on as its recent turns only: the whole record would make a large message.
        turns = bus.settings.history_turns
        session_turns, session = (session.value.turns[-2 * turns :] if turns > 0 else []), None
    await bus.publish(
        request_of(tracked, session_turns, session),
        bus.subjects.chat_requested,
        dedupe_key=msg_id(tracked.value.request_id, "requested"),
    )


async def start(bus: Bus, request_id: str, session: Session | None = None) -> None:
    """Its turn: move a queued request to accepted and publish it. Whoever finds it due may call
    this (the end before it, a re-run of that end, the gateway that queued it), with the
    session's record and revision when it has them current (they go along); a request that has no
    record yet is started by the gateway that is writing it, and one already on its way is
    published again only under the same dedupe key."""
    tracked: Tracked | None = await records(bus).load(request_id)
    if tracked is None or tracked.value.state not in ("queued", "accepted"):
        return
    # Its own trace, not the one of the request that ended before it.
    with tracer.start_as_current_span(
        "request dequeued",
        context=context.Context(),
        kind=trace.SpanKind.PRODUCER,
        attributes={"sidekick.request_id": request_id},
    ):
        if tracked.value.state == "queued":
            try:
                tracked = await records(bus).move(
                    request_id, "accepted", known=tracked, trace_id=current_trace_id()
                )
            except IllegalMove:
                return  # cancelled while it waited
        await publish(bus, tracked, session=session)
