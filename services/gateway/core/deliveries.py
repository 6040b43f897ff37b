"""Results a client saw live are noted in their session's record (so a reconnect does not
replay them) lazily: in the session's next write by this gateway — the claim of the next
message, which a chat sends within seconds — or after `delay` seconds when none comes. A
separate write per answer raced that claim for the same key (a compare-and-set retry, two
more bus messages, most requests); folded in, it costs nothing. A gateway that dies within
`delay` of an answer forgets the note: that answer is replayed once on reconnect.

Until the note is written the session's record still lists the result as undelivered, so a
socket that joins the session meanwhile (a second tab, a page reloaded the moment the answer
came) would be given it again as missed. So the gateway remembers what it delivered live for
`REMEMBER` seconds, and a replay skips it (`delivered_here`); this costs no bus message. A socket
on another gateway replica within `delay` of the answer is not covered: that replica cannot know.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable

from services.runtime.bus.core import Bus
from services.runtime.requests.sessions import mark_delivered, update_session

log = logging.getLogger("sidekick.gateway")

DELAY = 2.0
# Seconds a live delivery is remembered here: well past `delay`, and past a note's write that
# waits on a slow bus; a note never written is replayed after it (as a lost one would be).
REMEMBER = 60.0


class Deliveries:
    def __init__(
        self, bus: Bus, delay: float = DELAY, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.bus = bus
        self.delay = delay
        self.clock = clock
        self.pending: dict[str, set[str]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        # What sockets here were given live, by session, and when (oldest first in `_order`).
        self._live: dict[str, dict[str, float]] = {}
        self._order: deque[tuple[float, str, str]] = deque()

    def delivered_here(self, session_id: str) -> frozenset[str]:
        """The session's results a socket of this gateway was given live lately."""
        self._forget(self.clock())
        return frozenset(self._live.get(session_id, ()))

    def _forget(self, now: float) -> None:
        while self._order and now - self._order[0][0] > REMEMBER:
            when, session_id, request_id = self._order.popleft()
            given = self._live.get(session_id, {})
            if given.get(request_id) == when:
                del given[request_id]
                if not given:
                    del self._live[session_id]

    def seen(self, session_id: str, request_id: str) -> None:
        now = self.clock()
        self._forget(now)
        self._live.setdefault(session_id, {})[request_id] = now
        self._order.append((now, session_id, request_id))
        waiting = self.pending.setdefault(session_id, set())
        if not waiting:
            task = asyncio.get_running_loop().create_task(self._flush(session_id))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        waiting.add(request_id)

    def take(self, session_id: str) -> list[str]:
        """The session's pending notes, for a write that carries them."""
        return sorted(self.pending.pop(session_id, set()))

    def give_back(self, session_id: str, ids: list[str]) -> None:
        """Notes taken for a write that did not happen."""
        for request_id in ids:
            self.seen(session_id, request_id)

    async def _flush(self, session_id: str) -> None:
        await asyncio.sleep(self.delay)
        await self._write(session_id)

    async def _write(self, session_id: str) -> None:
        ids = self.take(session_id)
        if not ids:
            return
        try:
            await update_session(self.bus, session_id, lambda rec: mark_delivered(rec, ids))
        except Exception as exc:
            log.warning("could not mark %s delivered: %r", ", ".join(ids), exc)

    async def stop(self) -> None:
        """Write what is pending now (the gateway is stopping)."""
        for task in list(self._tasks):
            task.cancel()
        for session_id in list(self.pending):
            await self._write(session_id)
