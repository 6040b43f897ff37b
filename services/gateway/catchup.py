"""What a gateway's sockets missed while its bus connection was away.

Client-bound events reach the gateways on core NATS. An end published while this gateway was
reconnecting (the NATS node it was on restarting, say) never reaches it, although it is stored
(the request's record, the session's undelivered list). So once the connection is back, every
session this gateway holds gets the replay a returning socket gets: the outcomes not yet
delivered, each shown once per socket."""

from __future__ import annotations

import asyncio

from services.gateway.hub import Hub
from services.gateway.ws import ChatSocket
from services.runtime.bus.core import Bus

# Seconds between looks at whether the bus connection was lost and came back.
EVERY = 1.0


class CatchUp:
    def __init__(self, bus: Bus, hub: Hub, chat: ChatSocket) -> None:
        self.bus = bus
        self.hub = hub
        self.chat = chat
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
            for session_id, conns in list(self.hub.sessions.items()):
                for conn in list(conns):
                    if not conn.closed:
                        await self.chat.replay(conn, session_id)
