"""Results a client saw live are noted in their session's record (so a reconnect does not
replay them) lazily: in the session's next write by this gateway — the claim of the next
message, which a chat sends while the reader is still there — or when the session's last
socket on this gateway goes (`left`), before a new socket of it is given its replay
(`write`), or after `delay` seconds when none of that comes. A separate write per answer cost
one more bus message per request (two, when it raced the next claim for the same key); folded
in, it costs nothing. A gateway that dies before its note is written forgets it: that answer
is replayed once on reconnect."""

from __future__ import annotations

import asyncio
import logging

from services.gateway.core.copies import SessionCopies
from services.runtime.bus.core import Bus
from services.runtime.requests.sessions import mark_delivered, write_session

log = logging.getLogger("sidekick.gateway")

DELAY = 60.0


class Deliveries:
    def __init__(self, bus: Bus, delay: float = DELAY, copies: SessionCopies | None = None) -> None:
        self.bus = bus
        self.delay = delay
        self.copies = copies or SessionCopies()
        self.pending: dict[str, set[str]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def seen(self, session_id: str, request_id: str) -> None:
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
