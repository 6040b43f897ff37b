"""A reply's tokens on their way to the client: one `StreamChunk` event per burst of tokens for
the clients listening now, and the same text kept coalesced for those who re-attach later.

A model writes tokens faster than each is worth a message (an event costs a publish, a hop
through nats-server and a parse in every gateway: the fake model's nine-token answer was nine
events). The first token goes out at once; tokens that arrive within `WINDOW` of the last event
are held and sent together when the window closes, so no token waits more than `WINDOW`. These
live chunks (`out.<session>.<request>.chunk`) reach the gateways holding the session and are not
stored.

What the results stream keeps of the reply (`...text`, for a client that re-attaches: A2A,
AG-UI, services/gateway/core/feed.py) is the same text in fewer, larger pieces: one stored chunk
per sentence of at least `STORE_MIN` characters, or per `STORE_MAX` characters, whichever comes
first; by size and punctuation, never by the clock, so what is stored depends on the model's
text alone. The tail not stored when the reply ends is stored then, unless the request's end
carries the whole text anyway (a direct answer's `request.completed`, whose output every
surface shows minus what it streamed). Events carry no trace context and make no span each:
the reply has one span, with the counts.
"""

from __future__ import annotations

import asyncio

from opentelemetry import trace

from contracts import StreamChunk
from services.runtime.bus.core import Bus

WINDOW = 0.002  # seconds
STORE_MIN = 80  # characters: a sentence this long or longer is stored when it ends
STORE_MAX = 600  # characters: stored whatever they end with
SENTENCE_ENDS = (".", "!", "?", "\n", ":", ";")
tracer = trace.get_tracer("sidekick.stream")


class ChunkStream:
    """The stream of one request's reply. `add` each delta; `close` flushes what is held and
    waits until every chunk was handed to the NATS client (before the outcome is published)."""

    def __init__(self, bus: Bus, request_id: str, session_id: str) -> None:
        self.bus = bus
        self.request_id = request_id
        self.session_id = session_id
        self.subject = bus.subjects.stream(request_id, session_id)
        self.kept_subject = bus.subjects.stored_text(request_id, session_id)
        self.seq = 0
        self.kept_seq = 0
        self.deltas = 0
        self.held: list[str] = []
        self.unkept: list[str] = []  # not yet stored
        self.unkept_chars = 0
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
        self._kept(delta)
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
        self._emit(chunk, self.subject)

    def _kept(self, delta: str) -> None:
        """Count a delta towards the stored text; store it when a long enough sentence ends
        with it (by the deltas alone: the live window's timing does not move the cuts)."""
        self.unkept.append(delta)
        self.unkept_chars += len(delta)
        stripped = delta.rstrip()
        sentence = bool(stripped) and stripped.endswith(SENTENCE_ENDS)
        if self.unkept_chars >= STORE_MAX or (self.unkept_chars >= STORE_MIN and sentence):
            self._keep()

    def _keep(self) -> None:
        """Store the text not yet stored, as one chunk."""
        if not self.unkept:
            return
        text = "".join(self.unkept)
        self.unkept.clear()
        self.unkept_chars = 0
        kept = StreamChunk(
            request_id=self.request_id, session_id=self.session_id, seq=self.kept_seq, text=text
        )
        self.kept_seq += 1
        self._emit(kept, self.kept_subject)

    def _emit(self, chunk: StreamChunk, subject: str) -> None:
        # A task per chunk keeps the order: each appends its message to the client's buffer
        # before its first await, in the order the tasks were made.
        task = asyncio.get_running_loop().create_task(self.bus.emit(chunk, subject))
        self.sending.add(task)
        task.add_done_callback(self.sending.discard)

    async def close(self, *, flush: bool = True, end_has_text: bool = False) -> None:
        """Stop: what is held is sent (`flush`) or dropped, and the tail not yet stored is
        stored, unless `end_has_text`: the request's end, published next, carries the whole
        reply (a re-attaching client reads the rest from it)."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if flush:
            self._flush()
        else:
            self.held.clear()
        if end_has_text:
            self.unkept.clear()
            self.unkept_chars = 0
        else:
            self._keep()
        if self.sending:
            await asyncio.gather(*self.sending)
        if self.span is not None:
            self.span.set_attribute("sidekick.stream.deltas", self.deltas)
            self.span.set_attribute("sidekick.stream.chunks", self.seq)
            self.span.set_attribute("sidekick.stream.stored", self.kept_seq)
            self.span.end()
            self.span = None
