"""Results a client saw live are noted in their session's record (so a reconnect does not
replay them) lazily: in the session's next write by this gateway — the claim of the next
message, which a chat sends while the reader is still there — or when the session's last
socket on this gateway goes (`left`), before a new socket of it is given its replay
(`write`), or after `delay` seconds when none of that comes. A separate write per answer cost
one more bus message per request (two, when it raced the next claim for the same key); folded
in, it costs nothing. A gateway that dies before its note is written forgets it: that answer
is replayed once on reconnect.

Until the note is written the session's record still lists the result as undelivered, so a
socket that joins the session meanwhile on this gateway is covered twice: its replay is
preceded by the note's write (`write`), and the gateway remembers what it delivered live for
`REMEMBER` seconds, so a replay skips it (`delivered_here`) even when that write failed. A
socket on another gateway replica before the note is written is not covered: that replica
cannot know.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable

from services.gateway.core.copies import SessionCopies
from services.runtime.bus.core import Bus
from services.runtime.requests.sessions import mark_delivered, write_session

log = logging.getLogger("sidekick.gateway")

DELAY = 60.0
# Seconds a live delivery is remembered here: past a note's write that waits on a slow bus; a
# note never written is replayed after it (as a lost one would be).
REMEMBER = 60.0


class Deliveries:
    def __init__(
        self,
        bus: Bus,
        delay: float = DELAY,
        copies: SessionCopies | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.bus = bus
        self.delay = delay
        self.copies = copies or SessionCopies()
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

    def left(self, session_id: str) -> None:
        """No socket of the session is left on this gateway: write its notes now."""
        if self.pending.get(session_id):
            task = asyncio.get_running_loop().create_task(self.write(session_id))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def take(self, session_id: str) -> list[str]:
        """The session's pending notes, for a write that carries them."""
        return sorted(self.pending.pop(session_id, set()))

    def give_back(self, session_id: str, ids: list[str]) -> None:
        """Notes taken for a write that did not happen."""
        for request_id in ids:
            self.seen(session_id, request_id)

    async def _flush(self, session_id: str) -> None:
        await asyncio.sleep(self.delay)
        await self.write(session_id)

    async def write(self, session_id: str) -> None:
        """Write the session's pending notes now (nothing when there are none)."""
        ids = self.take(session_id)
        if not ids:
            return
        try:
            # From this gateway's copy when it holds the session: one write, not two.
            written = await write_session(
                self.bus,
                session_id,
                lambda rec: mark_delivered(rec, ids),
                known=self.copies.get(session_id),
            )
            if written is not None:
                self.copies.wrote(session_id, written)
        except Exception as exc:
            log.warning("could not mark %s delivered: %r", ", ".join(ids), exc)

    async def stop(self) -> None:
        """Write what is pending now (the gateway is stopping)."""
        for task in list(self._tasks):
            task.cancel()
        for session_id in list(self.pending):
            await self.write(session_id)
