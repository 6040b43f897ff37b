"""Results a client saw live are noted in their session's record (so a reconnect does not
replay them) lazily: in the session's next write by this gateway — the claim of the next
message, which a chat sends within seconds — or after `delay` seconds when none comes. A
separate write per answer raced that claim for the same key (a compare-and-set retry, two
more bus messages, most requests); folded in, it costs nothing. A gateway that dies within
`delay` of an answer forgets the note: that answer is replayed once on reconnect."""

from __future__ import annotations

import asyncio
import logging

from services.gateway.core.copies import SessionCopies
from services.runtime.bus.core import Bus
from services.runtime.requests.sessions import mark_delivered, write_session

log = logging.getLogger("sidekick.gateway")

DELAY = 2.0


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
            await self._write(session_id)
