"""What a gateway's sockets missed while its bus connection was away.

Client-bound events reach the gateways on core NATS. An end published while this gateway was
reconnecting (the NATS node it was on restarting, say) never reaches it, although it is stored
(the request's record, the session's undelivered list). So once the connection is back, every
session this gateway holds gets the replay a returning socket gets: the outcomes not yet
delivered, each shown once per socket. An HTTP caller waiting on one request (`/v1`, the
workflows chat: `Hub.watch`) is given its request's stored end, if it ended meanwhile; a parked
request's question is not given (it may be the one just answered), so such a caller still
learns of a question asked in the gap only when its wait runs out. The A2A and AG-UI streams
follow the results stream with ordered consumers, which the NATS client re-creates from the last
sequence they saw once two idle heartbeats go missing: they need none of this."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from services.gateway.core.hub import Hub
from services.gateway.core.intake import Intake
from services.runtime.bus.core import Bus

log = logging.getLogger("sidekick.gateway")

# Seconds between looks at whether the bus connection was lost and came back.
EVERY = 1.0


class CatchUp:
    """`sockets`: the WebSocket surface's replay to every socket the hub holds."""

    def __init__(
        self, bus: Bus, hub: Hub[Any], intake: Intake, sockets: Callable[[], Awaitable[None]]
    ) -> None:
        self.bus = bus
        self.hub = hub
        self.intake = intake
        self.sockets = sockets
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self.run())

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()

    async def run(self) -> None:
        seen = self.bus.nc.stats["reconnects"]
        while True:
            await asyncio.sleep(EVERY)
            now = self.bus.nc.stats["reconnects"]
            if now == seen or not self.bus.connected:
                continue
            seen = now
            await self.sockets()
            for request_id in list(self.hub.watchers):
                await self.ended(request_id)

    async def ended(self, request_id: str) -> None:
        """Give the request's watchers its stored end, if it has ended (a watcher stops at the
        first end it reads, so one that also came live is not seen twice)."""
        try:
            record = await self.intake.record(request_id)
        except Exception as exc:  # the next reconnect, or the watcher's own wait, covers it
            log.warning("could not read request %s after a reconnect: %r", request_id, exc)
            return
        if record is not None and record.ended and record.outcome is not None:
            for queue in self.hub.watchers.get(request_id, ()):
                queue.put_nowait(record.outcome)
