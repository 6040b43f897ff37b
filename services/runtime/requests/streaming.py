"""A reply's tokens on their way to the client: one `StreamChunk` event per burst of tokens.

A model writes tokens faster than each is worth a message (an event costs a publish, a hop
through nats-server and a parse in every gateway: the fake model's nine-token answer was nine
events). The first token goes out at once; tokens that arrive within `WINDOW` of the last event
are held and sent together when the window closes, so no token waits more than `WINDOW`. Events
carry no trace context and make no span each: the reply has one span, with the counts.
"""

from __future__ import annotations

import asyncio

from opentelemetry import trace

from contracts import StreamChunk
from services.runtime.bus.core import Bus

WINDOW = 0.002  # seconds
tracer = trace.get_tracer("sidekick.stream")


class ChunkStream:
    """The stream of one request's reply. `add` each delta; `close` flushes what is held and
    waits until every chunk was handed to the NATS client (before the outcome is published)."""

    def __init__(self, bus: Bus, request_id: str, session_id: str) -> None:
        self.bus = bus
        self.request_id = request_id
        self.session_id = session_id
        self.subject = bus.subjects.stream(request_id)
        self.seq = 0
        self.deltas = 0
        self.held: list[str] = []
        self.window_ends = 0.0
        self.timer: asyncio.TimerHandle | None = None
        self.sending: set[asyncio.Task[None]] = set()
        self.span: trace.Span | None = None

    def add(self, delta: str) -> None:
        loop = asyncio.get_running_loop()
        if self.span is None:
            self.span = tracer.start_span(
                "stream reply", attributes={"sidekick.request_id": self.request_id}
            )
        self.deltas += 1
        now = loop.time()
        if not self.held and now >= self.window_ends:
            self._send(delta, now)
            return
        self.held.append(delta)
        if self.timer is None:
            self.timer = loop.call_at(self.window_ends, self._flush)

    def _flush(self) -> None:
        self.timer = None
        if self.held:
            text = "".join(self.held)
            self.held.clear()
            self._send(text, asyncio.get_running_loop().time())

    def _send(self, text: str, now: float) -> None:
        chunk = StreamChunk(
            request_id=self.request_id, session_id=self.session_id, seq=self.seq, text=text
        )
        self.seq += 1
        self.window_ends = now + WINDOW
        # A task per chunk keeps the order: each appends its message to the client's buffer
        # before its first await, in the order the tasks were made.
        task = asyncio.get_running_loop().create_task(self.bus.emit(chunk, self.subject))
        self.sending.add(task)
        task.add_done_callback(self.sending.discard)

    async def close(self, *, flush: bool = True) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if flush:
            self._flush()
        else:
            self.held.clear()
        if self.sending:
            await asyncio.gather(*self.sending)
        if self.span is not None:
            self.span.set_attribute("sidekick.stream.deltas", self.deltas)
            self.span.set_attribute("sidekick.stream.chunks", self.seq)
            self.span.end()
            self.span = None
