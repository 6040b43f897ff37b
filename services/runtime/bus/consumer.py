"""A durable JetStream consumer read with a standing pull: the lean way a service takes work.

The consumer keeps pull requests waiting at the server for as many messages as it has room for
(`capacity` handlers at once) and tops them up when half the room is free, so a message costs
its delivery and its ack, not a pull request each (a fetch loop asked once per message at low
load, twice when idle). Each message is handled in a task of its own; `Bus` (bus.py) wraps the
handler with parsing, tracing, acks and retries.

Pull requests expire (`EXPIRES`) and carry idle heartbeats (`IDLE`), so a request the server
forgot (a restart, a reconnect) is noticed and asked again. While handlers run, one ticker per
process sends in-progress acks (+WPI) every `heartbeat_interval` seconds for each message held,
which keeps the consumer's short ack wait from expiring: a message held by a dead process is
redelivered within the ack wait; a live one never is.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

import orjson
from nats.aio.client import Client
from nats.aio.msg import Msg

log = logging.getLogger("sidekick.bus")

EXPIRES = 30.0  # seconds a pull request waits at the server
IDLE = 5.0  # the server's idle heartbeat on a waiting pull request
CHECK = 1.0  # seconds between looks at the connection (a reconnect loses pull requests)
STATUS = "Status"
PENDING = "Nats-Pending-Messages"


class Consumer:
    """One durable pull consumer of a stream, handled by `handle` with up to `capacity`
    messages at once."""

    def __init__(
        self,
        nc: Client,
        stream: str,
        durable: str,
        capacity: int,
        handle: Callable[[Msg], Awaitable[None]],
    ) -> None:
        self.nc = nc
        self.next_subject = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}"
        self.durable = durable
        self.capacity = max(1, capacity)
        self.handle = handle
        self.pending = 0  # messages asked for and not yet delivered
        self.running: set[asyncio.Task[None]] = set()
        # The messages being handled, by reply subject (one per delivery), and when each one's
        # ack timer was last reset.
        self.held: dict[str, tuple[Msg, float]] = {}
        self.heard = time.monotonic()  # the last message or heartbeat from the server
        self.asked_until = 0.0  # when the latest pull request expires
        self.inbox = ""
        self._wake = asyncio.Event()
        self._pulling: asyncio.Task[None] | None = None
        self._stopping = False

    async def start(self) -> None:
        self.inbox = self.nc.new_inbox()
        await self.nc.subscribe(self.inbox, cb=self._on_message)
        self._pulling = asyncio.create_task(self._pull(), name=f"pull {self.durable}")

    async def stop(self, grace: float) -> None:
        """Ask for nothing more; give running handlers `grace` seconds to finish (what is not
        acked by then is redelivered to another process after the ack wait)."""
        self._stopping = True
        if self._pulling is not None:
            self._pulling.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pulling
        if self.running:
            await asyncio.wait(list(self.running), timeout=grace)

    async def _on_message(self, msg: Msg) -> None:
        self.heard = time.monotonic()
        headers = msg.headers
        if headers and STATUS in headers and not msg.data:
            self._status(headers)
            return
        self.pending = max(0, self.pending - 1)
        if self._stopping:
            return  # not handled, not acked: redelivered after the ack wait
        self.held[msg.reply] = (msg, time.monotonic())
        task = asyncio.create_task(self._run(msg))
        self.running.add(task)
        task.add_done_callback(self.running.discard)

    def _status(self, headers: dict[str, str]) -> None:
        status = headers[STATUS]
        if status == "100":
            return  # idle heartbeat: the request is still waiting
        # 404/408: a request ended (expired, or nothing to give); 409: the server ended it
        # (too many waiting, a leadership change, a restart). Its undelivered rest is said in
        # a header; without one, assume every request ended.
        left = headers.get(PENDING)
        if left is not None and left.isdigit():
            self.pending = max(0, self.pending - int(left))
        else:
            self.pending = 0
        if status not in ("404", "408"):
            log.info("pull request on %s ended: %s %s", self.durable, status, headers)
        self._wake.set()

    async def _run(self, msg: Msg) -> None:
        try:
            await self.handle(msg)
        finally:
            self.held.pop(msg.reply, None)
            if self.capacity - self.pending - len(self.running) >= self.capacity // 2:
                self._wake.set()

    async def _pull(self) -> None:
        """Keep pull requests waiting for the free room: ask when nothing is asked for, or
        when half the room is free. A request ends at the server with a status saying how much
        of it was left undelivered (`_status`); one not heard of past its expiry, or while the
        server sends no heartbeat, is taken as forgotten (a restart, a reconnect)."""
        reconnects = self.nc.stats["reconnects"]
        while True:
            now = time.monotonic()
            if reconnects != self.nc.stats["reconnects"]:
                # A new connection (maybe a restarted server): what was asked is gone.
                reconnects = self.nc.stats["reconnects"]
                self.pending = 0
            if self.pending and (now > self.asked_until or now - self.heard > 2 * IDLE + 1):
                self.pending = 0
            room = self.capacity - self.pending - len(self.running)
            if room > 0 and (self.pending == 0 or room >= self.capacity // 2):
                await self._ask(room)
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), CHECK)

    async def _ask(self, batch: int) -> None:
        request = {
            "batch": batch,
            "expires": int(EXPIRES * 1e9),
            "idle_heartbeat": int(IDLE * 1e9),
        }
        try:
            await self.nc.publish(self.next_subject, orjson.dumps(request), reply=self.inbox)
        except Exception as exc:  # disconnected: ask again on the next turn
            log.info("could not ask %s for messages: %r", self.durable, exc)
            return
        now = time.monotonic()
        self.pending += batch
        self.heard = max(self.heard, now)
        self.asked_until = now + EXPIRES + 2.0

    async def keep_alive(self, interval: float) -> None:
        """+WPI for every message held longer than `interval` since its last reset."""
        now = time.monotonic()
        for reply, (msg, since) in list(self.held.items()):
            if now - since >= interval and reply in self.held:
                self.held[reply] = (msg, now)
                with contextlib.suppress(Exception):
                    await msg.in_progress()
