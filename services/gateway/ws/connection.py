"""One client socket: the frames waiting for it, what it has been given, and how each bus event
becomes its frames (frames.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from dataclasses import dataclass, field

from starlette.websockets import WebSocket, WebSocketState

from contracts import Outcome, Progress, StreamChunk
from contracts.base import IfBusy
from contracts.frames import EndFrame, OutFrame, StreamFrame
from services.gateway.core.outcomes import progress_frame
from services.gateway.ws.frames import ROUTED_TEXT, outcome_frames, stream_frame

log = logging.getLogger("sidekick.gateway")

SEND_QUEUE_FRAMES = 1024
SEEN_LIMIT = 4096


@dataclass(eq=False)
class Connection:
    """One client socket. Frames wait in a bounded buffer so a slow reader cannot grow the
    gateway's memory; when it is full the socket is closed with code 1008. The buffer and the
    task that writes it exist only while there is something to send: an idle socket holds
    neither (a queue and a task each were 5 of an idle socket's 34 KiB)."""

    ws: WebSocket
    principal: str = "anonymous"
    events: bool = False
    authenticated: bool = True
    sessions: set[str] = field(default_factory=set)
    # Frames not yet written, oldest first, and the task writing them (None: nothing to send).
    pending: deque[str] | None = None
    writing: asyncio.Task[None] | None = None
    closed: bool = False
    # Outcome events (by event id) this socket already got, so a replay never repeats one.
    seen: set[str] = field(default_factory=set)
    # The socket's session (scoped), set by any frame with a uuid, as the seed's server does.
    session: str | None = None
    if_busy: IfBusy = "enqueue"
    # Old clients draw one bubble per turn (chunks ... end): a notice that is not part of the
    # answer being streamed waits for its end, so it never lands inside that answer.
    turn_open: bool = False
    held: list[str] = field(default_factory=list)
    # Requests routed while this socket watched: it got ROUTED_TEXT first.
    prefaced: set[str] = field(default_factory=set)
    spoke_auth: bool = False  # it sent {"auth": ...}: it knows Sidekick's error frames

    @property
    def error_frames(self) -> bool:
        """Whether errors reach it as {"error": ...} frames (else as text and an end)."""
        return self.events or self.spoke_auth

    def send(self, frame: OutFrame) -> None:
        if self.closed:
            return
        if not self.events:
            if isinstance(frame, StreamFrame):
                self.turn_open = True
            elif isinstance(frame, EndFrame):
                self.turn_open = False
        if self.pending is None:
            self.pending = deque((frame.wire(),))
            self.writing = asyncio.get_running_loop().create_task(self._write())
        elif len(self.pending) < SEND_QUEUE_FRAMES:
            self.pending.append(frame.wire())
        else:
            log.warning("closing a slow client: send queue full")
            self.closed = True
            self.pending.clear()
            asyncio.get_running_loop().create_task(self.close(1008, "send queue full"))
            return
        if isinstance(frame, EndFrame) and self.held:
            held, self.held = self.held, []
            for text in held:
                self.notice(text)

    def notice(self, text: str) -> None:
        """An old client's one-turn message (an error, "queued"): text then an end frame, after
        the turn it is streaming, if any."""
        if self.turn_open:
            self.held.append(text)
            return
        self.send(StreamFrame(on_chat_model_stream=text))
        self.send(EndFrame(on_chat_model_end=True))

    def chunk(self, chunk: StreamChunk) -> None:
        self.send(stream_frame(self, chunk.text, chunk.request_id))

    def progress(self, p: Progress) -> None:
        if self.events:
            self.send(progress_frame(p))
        elif p.stage == "routed" and p.request_id not in self.prefaced:
            if len(self.prefaced) >= SEEN_LIMIT:
                self.prefaced.clear()
            self.prefaced.add(p.request_id)
            self.send(StreamFrame(on_chat_model_stream=ROUTED_TEXT))

    def outcome(self, event: Outcome, already: str) -> bool:
        if self.closed or not self.mark_seen(event.event_id):
            return False
        for frame in outcome_frames(self, event, already):
            self.send(frame)
        return True

    def mark_seen(self, event_id: str) -> bool:
        """True the first time this socket is given this outcome."""
        if event_id in self.seen:
            return False
        if len(self.seen) >= SEEN_LIMIT:
            self.seen.clear()
        self.seen.add(event_id)
        return True

    async def _write(self) -> None:
        pending = self.pending
        try:
            while pending:
                if self.ws.client_state != WebSocketState.CONNECTED:
                    return
                await self.ws.send_text(pending.popleft())
        except Exception as exc:  # the peer went away mid-send: its reader ends the socket
            log.debug("socket write failed: %r", exc)
        finally:
            self.pending = self.writing = None

    async def flushed(self) -> None:
        """Until what was sent so far is written (a deadline around it leaves the writer be)."""
        if self.writing is not None:
            await asyncio.shield(self.writing)

    async def close(self, code: int, reason: str) -> None:
        with contextlib.suppress(Exception):
            await self.ws.close(code=code, reason=reason)

    def stop(self) -> None:
        """Take no more frames; what is buffered is still written."""
        self.closed = True

    async def discard(self) -> None:
        """The socket is gone: stop writing to it."""
        self.stop()
        if self.writing is not None:
            self.writing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.writing
