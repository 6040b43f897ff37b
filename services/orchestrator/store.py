"""Where the orchestrator keeps what it knows about a request between events: the request's
record (the lifecycle's `status` bucket), which holds the attempt loop's state (`loop`), with
the revision it was last read or written at. One record, so one write moves both: the loop's
next step and the request's place in its life (services/runtime/requests/lifecycle.py).

Every write is a compare-and-set, so the copy this process keeps is only a starting point: the
next write goes straight to the server with the revision remembered (one round trip instead of
a read and a write), and when another process wrote in between the write fails and the record
is read again. A step that would write nothing on the copy (an event that changes nothing, a
duplicate), and a step that ends the request (its end is written later, by `finish`, once the
spend is counted), are decided on a fresh read (services/runtime/bus/kvstore.py): the copy may
be behind a step another replica took. The copies are bounded (`LIMIT` requests) and dropped
when a request ends. So are the copies of the requests' sessions as `request.routed` brought
them (`sessions`): the session's write at a request's end starts from one.

The loop's `secret` (the root of its dispatch tokens and dedupe keys, authentic.py) is never
stored: it is derived from this role's own login secret each time a record is read.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

from contracts import RequestRecord, RequestState, SessionRecord
from services.orchestrator import loop
from services.orchestrator.projection import record_move
from services.orchestrator.state import LoopState
from services.runtime.base.telemetry import new_span_id
from services.runtime.bus import sealing
from services.runtime.bus.core import Bus
from services.runtime.bus.kvstore import Versioned
from services.runtime.requests.lifecycle import Planned, Tracked, records

K = TypeVar("K")
V = TypeVar("V")
LIMIT = 10_000
SESSIONS = 1_000  # sessions kept for requests in flight here (each up to 50 turns)
# The states a request's record may pass through on its way to the orchestrator's first move,
# in the same write: the frontline routed it (accepted -> routed -> working, or -> an end).
VIA: tuple[RequestState, ...] = ("routed",)


class Recent(Generic[K, V]):
    """A bounded map that forgets the least recently used entries."""

    def __init__(self, limit: int = LIMIT) -> None:
        self.limit = limit
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.limit:
            self._items.popitem(last=False)

    def pop(self, key: K) -> None:
        self._items.pop(key, None)


class Store:
    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.records: Recent[str, Tracked] = Recent()
        # By request: its session as the gateway sent it on (request.routed), the start of the
        # session's write at the request's end (a write that finds it moved reads it again).
        self.sessions: Recent[str, Versioned[SessionRecord]] = Recent(SESSIONS)
        self._role_secret: bytes | None = None

    def loop_of(self, record: RequestRecord) -> LoopState | None:
        """The record's loop state, with its secret (never stored: made again here)."""
        if record.loop is None:
            return None
        return self.secret_for(record.loop)

    def _secret(self, state: LoopState) -> str:
        if self._role_secret is None:
            self._role_secret = sealing.role_secret(self.bus.settings, self.bus.service)
        what = f"loop:{state.request.request_id}:{state.request.event_id}".encode()
        return hmac.new(self._role_secret, what, hashlib.sha256).hexdigest()[:32]

    def secret_for(self, state: LoopState) -> LoopState:
        """A new loop state (not stored yet) with its secret."""
        return state.model_copy(update={"secret": self._secret(state)})

    async def load(self, request_id: str) -> LoopState | None:
        """The loop's state as stored now. Read, not remembered: what the caller decides from
        it (a redelivery, a cancel, giving up) must not rest on a copy another replica has
        moved on since."""
        tracked = await records(self.bus).load(request_id)
        if tracked is None:
            return None
        self.moved(tracked)
        return self.loop_of(tracked.value)

    async def update(
        self,
        request_id: str,
        change: Callable[[LoopState], LoopState],
        *,
        start: LoopState | None = None,
        known: Tracked | None = None,
    ) -> tuple[LoopState, Tracked]:
        """Fold `change` into the loop's state and move the request's record with it, in one
        compare-and-set; `start` is the state of a request seen for the first time. A step that
        ends the request (or parks it) is not written here: the caller counts its spend and
        then ends it (`finish`, with the loop's state). Returns the loop's state and the record
        as written, or as read (proven current). An attempt about to be dispatched gets its
        span id in the same write (tracing.py)."""
        folded: list[LoopState] = []

        def plan(record: RequestRecord) -> Planned | None:
            current = self.loop_of(record) or (self.secret_for(start) if start else None)
            if current is None:
                raise LookupError(f"no loop state for request {request_id}")
            new = _with_span(change(current))
            folded[:] = [new]
            if new == current and record.loop is not None:
                return None
            move = record_move(new)
            if move is None:
                return None  # an end, a question, or still deciding: `finish` writes it
            target, fields = move
            return target, {"loop": new, **fields}

        tracked = await records(self.bus).change(
            request_id, plan, known=known or self.records.get(request_id), via=VIA
        )
        self.moved(tracked)
        return folded[0], tracked

    def record(self, request_id: str) -> Tracked | None:
        """The request's record as this process last moved it, if it remembers."""
        return self.records.get(request_id)

    def moved(self, tracked: Tracked) -> Tracked:
        if tracked.value.ended:
            self.records.pop(tracked.value.request_id)
        else:
            self.records.put(tracked.value.request_id, tracked)
        return tracked


def _with_span(state: LoopState) -> LoopState:
    """Give the attempt about to be dispatched its span id and start time (once)."""
    cur = state.current
    if state.status != "working" or cur is None or cur.span_id is not None:
        return state
    if not state.trace_id:
        return state
    span_id = format(new_span_id(), "016x")
    return loop.attempt_started(state, cur.n, span_id, time.time_ns())
