"""Where the orchestrator keeps what it knows about a request between events: the loop's state
(its own `requests` bucket) and the request's record (the lifecycle's `status` bucket), each
with the revision it was last read or written at.

Every write is a compare-and-set, so the copies this process keeps are only a starting point:
the next write goes straight to the server with the revision remembered (one round trip instead
of a read and a write), and when another process wrote in between the write fails and the value
is read again. An event that would change nothing on the copy is checked on a fresh read
(services/runtime/bus/kvstore.py): the copy may be behind a step another replica took. With
one orchestrator replica, or while one replica sees a request's events, the extra reads never
happen; with many, they happen when needed. The copies are bounded (`LIMIT`
requests) and dropped when a request ends.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

from contracts import TERMINAL_STATES
from services.orchestrator import loop
from services.orchestrator.state import LoopState
from services.runtime.base.telemetry import new_span_id
from services.runtime.bus.core import Bus, redelivered
from services.runtime.bus.kvstore import Versioned, get_model, mutate_versioned
from services.runtime.requests.lifecycle import Tracked

K = TypeVar("K")
V = TypeVar("V")
LIMIT = 10_000


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
        self.states: Recent[str, Versioned[LoopState]] = Recent()
        self.records: Recent[str, Tracked] = Recent()

    async def load(self, request_id: str) -> LoopState | None:
        """The loop's state as stored now. Read, not remembered: what the caller decides from
        it (a redelivery, a cancel, giving up) must not rest on a copy another replica has
        moved on since."""
        state, revision = await get_model(self.bus.kv.requests, request_id, LoopState)
        if state is not None:
            self.states.put(request_id, Versioned(state, revision))
        return state

    async def update(
        self,
        request_id: str,
        change: Callable[[LoopState], LoopState],
        *,
        start: LoopState | None = None,
    ) -> LoopState:
        """Fold `change` into the loop's state by compare-and-set; `start` is the state of a
        request seen for the first time (created by this write). An attempt about to be
        dispatched gets its span id in the same write (tracing.py)."""
        known = self.states.get(request_id)
        if known is None and start is not None and not redelivered():
            # First sight of a first delivery: nothing is stored yet, so the write is a create
            # (which fails, and reads, should something be there after all).
            known = Versioned(start, 0)

        def apply(cur: LoopState | None) -> LoopState | None:
            if cur is None:
                if start is None:
                    raise LookupError(f"no state for request {request_id}")
                cur = start
            new = _with_span(change(cur))
            return None if new == cur else new

        done = await mutate_versioned(
            self.bus.kv.requests, request_id, LoopState, apply, known=known
        )
        assert done is not None
        if done.value.status in TERMINAL_STATES:
            self.states.pop(request_id)
        else:
            self.states.put(request_id, done)
        return done.value

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
