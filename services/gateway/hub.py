"""Which sockets belong to which session, and how bus events become client frames."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from starlette.websockets import WebSocket, WebSocketState

from contracts import (
    OUTCOMES,
    AnyEvent,
    ClarificationRequested,
    Outcome,
    Progress,
    RequestCancelled,
    RequestCompleted,
    RequestFailed,
    StreamChunk,
)
from contracts.base import IfBusy
from contracts.frames import (
    CancelledMetadata,
    ClarificationEvent,
    ClarificationMetadata,
    CompletedMetadata,
    EndFrame,
    EndStatus,
    ErrorBody,
    ErrorFrame,
    FailedMetadata,
    OutFrame,
    ProgressEvent,
    StreamFrame,
)
from services.runtime.base.metrics import WS_CONNECTIONS

log = logging.getLogger("sidekick.gateway")

SEND_QUEUE_FRAMES = 1024
SEEN_LIMIT = 4096
# What the TypeScript seed's server streamed first for a request it routed.
ROUTED_TEXT = "Processing your request..."


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


@dataclass
class Hub:
    """Routes bus events to the sockets of the session they belong to. Session ids are scoped
    by principal ("alice/<uuid>"), so one principal's events never reach another's sockets."""

    sessions: dict[str, set[Connection]] = field(default_factory=dict)
    streamed: dict[str, str] = field(default_factory=dict)
    # Called with (session_id, request_id) when an outcome reached at least one socket live.
    on_delivered: Callable[[str, str], None] | None = None
    # HTTP callers waiting on one request (the workflow chat, /v1/chat/completions).
    watchers: dict[str, set[asyncio.Queue[AnyEvent]]] = field(default_factory=dict)

    @contextlib.contextmanager
    def watch(self, request_id: str) -> Iterator[asyncio.Queue[AnyEvent]]:
        """Every client-bound event of one request, in order, while the block runs (enter it
        before the request is sent, so nothing is missed)."""
        queue: asyncio.Queue[AnyEvent] = asyncio.Queue()
        self.watchers.setdefault(request_id, set()).add(queue)
        try:
            yield queue
        finally:
            queues = self.watchers.get(request_id, set())
            queues.discard(queue)
            if not queues:
                self.watchers.pop(request_id, None)

    def attach(self, conn: Connection, session_id: str) -> bool:
        """Attach; True if the socket was not yet attached to this session."""
        new = session_id not in conn.sessions
        conn.sessions.add(session_id)
        self.sessions.setdefault(session_id, set()).add(conn)
        return new

    def opened(self) -> None:
        WS_CONNECTIONS.inc()

    def detach(self, conn: Connection) -> None:
        WS_CONNECTIONS.dec()
        conn.stop()
        for sid in conn.sessions:
            conns = self.sessions.get(sid)
            if conns is not None:
                conns.discard(conn)
                if not conns:
                    del self.sessions[sid]

    def _targets(self, session_id: str) -> set[Connection]:
        return self.sessions.get(session_id, set())

    def dispatch(self, event: AnyEvent) -> None:
        for queue in self.watchers.get(event.request_id, ()):
            queue.put_nowait(event)
        if isinstance(event, StreamChunk):
            self.on_chunk(event)
        elif isinstance(event, Progress):
            self.on_progress(event)
        elif isinstance(event, OUTCOMES):
            self.on_outcome(event)

    def on_chunk(self, chunk: StreamChunk) -> None:
        targets = self._targets(chunk.session_id)
        if not targets:
            return
        self.streamed[chunk.request_id] = self.streamed.get(chunk.request_id, "") + chunk.text
        for conn in targets:
            conn.send(stream_frame(conn, chunk.text, chunk.request_id))

    def on_progress(self, p: Progress) -> None:
        frame = progress_frame(p)
        for conn in self._targets(p.session_id):
            if conn.events:
                conn.send(frame)
            elif p.stage == "routed" and p.request_id not in conn.prefaced:
                if len(conn.prefaced) >= SEEN_LIMIT:
                    conn.prefaced.clear()
                conn.prefaced.add(p.request_id)
                conn.send(StreamFrame(on_chat_model_stream=ROUTED_TEXT))

    def on_outcome(self, event: Outcome) -> None:
        already = self.streamed.pop(event.request_id, "")
        delivered = False
        for conn in list(self._targets(event.session_id)):
            if conn.closed or not conn.mark_seen(event.event_id):
                continue
            for frame in outcome_frames(conn, event, already):
                conn.send(frame)
            delivered = True
        if delivered and self.on_delivered is not None:
            self.on_delivered(event.session_id, event.request_id)


def stream_frame(conn: Connection, text: str, request_id: str) -> StreamFrame:
    if conn.events:
        return StreamFrame(on_chat_model_stream=text, request_id=request_id)
    return StreamFrame(on_chat_model_stream=text)


def outcome_frames(conn: Connection, event: Outcome, already: str = "") -> list[OutFrame]:
    """What a client sees when a request ends or parks. `already` is the text streamed live."""
    frames: list[OutFrame] = []

    def text(chunk: str) -> None:
        frames.append(stream_frame(conn, chunk, event.request_id))

    if not conn.events and event.request_id in conn.prefaced:
        conn.prefaced.discard(event.request_id)
        if not isinstance(event, RequestCancelled):
            text("\n\n")  # after ROUTED_TEXT, as the seed's server did
    if isinstance(event, RequestCompleted):
        rest = event.output[len(already) :] if event.output.startswith(already) else event.output
        if rest:
            text(rest)
    elif isinstance(event, RequestFailed):
        if conn.events:
            body = ErrorBody(code=event.code, message=event.error, request_id=event.request_id)
            frames.append(ErrorFrame(error=body))
        else:  # an old client knows only text and ends (it shows any other key as JSON)
            text(f"Sorry, I could not do that: {event.error}")
    elif isinstance(event, ClarificationRequested):
        if conn.events:
            frames.append(
                ClarificationEvent(
                    event="clarification",
                    request_id=event.request_id,
                    questions=event.questions,
                    # Only an approval carries the key, so a plain question's frame is as before.
                    **({"approval": event.approval} if event.approval is not None else {}),
                )
            )
        else:
            text(questions_text(event))
    frames.append(end_frame(conn, event))
    return frames


def questions_text(event: ClarificationRequested) -> str:
    if event.approval is not None:  # one question, whole: the action exactly as it would run
        return "\n".join(q.question for q in event.questions)
    lines = ["I need a little more information before I go on:"]
    lines += [f"{n}. {q.question}" for n, q in enumerate(event.questions, 1)]
    lines.append("Reply with your answers and I will continue.")
    return "\n".join(lines)


def progress_frame(p: Progress) -> ProgressEvent:
    return ProgressEvent.model_validate({"event": "progress", **p.model_dump(exclude={"kind"})})


EndMetadata = CompletedMetadata | FailedMetadata | CancelledMetadata | ClarificationMetadata


def end_metadata(done: Outcome) -> EndMetadata:
    """The details of how a request ended (or what it asks), for clients that want them."""
    if isinstance(done, RequestCompleted):
        meta = done.model_dump(exclude={"kind", "output", "event_id", "ts", "session_id"})
        return CompletedMetadata.model_validate(meta)
    if isinstance(done, RequestFailed):
        return FailedMetadata(code=done.code, error=done.error, trace_id=done.trace_id)
    if isinstance(done, RequestCancelled):
        return CancelledMetadata(reason=done.reason, trace_id=done.trace_id)
    return ClarificationMetadata(
        source=done.source,
        attempt=done.attempt,
        questions=done.questions,
        trace_id=None,
        **({"approval": done.approval} if done.approval is not None else {}),
    )


def end_frame(conn: Connection, done: Outcome) -> EndFrame:
    if not conn.events:
        return EndFrame(on_chat_model_end=True)
    if isinstance(done, RequestCompleted):
        status: EndStatus = done.status
    elif isinstance(done, RequestFailed):
        status = "failed"
    elif isinstance(done, RequestCancelled):
        status = "cancelled"
    else:
        status = "awaiting_clarification"
    return EndFrame(
        on_chat_model_end=True,
        request_id=done.request_id,
        status=status,
        metadata=end_metadata(done),
    )
