"""Which sockets belong to which session, and how bus events become client frames."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from starlette.websockets import WebSocket, WebSocketState

from contracts import AnyEvent, Progress, RequestCompleted, RequestFailed, StreamChunk
from services.runtime.metrics import WS_CONNECTIONS

log = logging.getLogger("sidekick.gateway")

SEND_QUEUE_FRAMES = 1024


@dataclass(eq=False)
class Connection:
    """One client socket. Frames go through a bounded queue so a slow reader cannot grow the
    gateway's memory; when the queue is full the socket is closed with code 1008."""

    ws: WebSocket
    principal: str = "anonymous"
    events: bool = False
    sessions: set[str] = field(default_factory=set)
    queue: asyncio.Queue[str | None] = field(
        default_factory=lambda: asyncio.Queue(SEND_QUEUE_FRAMES)
    )
    closed: bool = False

    def send(self, frame: dict[str, Any]) -> None:
        if self.closed:
            return
        try:
            self.queue.put_nowait(json.dumps(frame, ensure_ascii=False))
        except asyncio.QueueFull:
            log.warning("closing a slow client: send queue full")
            self.closed = True
            asyncio.get_running_loop().create_task(self._close(1008, "send queue full"))

    async def writer(self) -> None:
        while True:
            text = await self.queue.get()
            if text is None or self.ws.client_state != WebSocketState.CONNECTED:
                return
            await self.ws.send_text(text)

    async def _close(self, code: int, reason: str) -> None:
        with contextlib.suppress(Exception):
            await self.ws.close(code=code, reason=reason)

    def stop(self) -> None:
        self.closed = True
        with contextlib.suppress(asyncio.QueueFull):
            self.queue.put_nowait(None)


@dataclass
class Hub:
    """Routes bus events to the sockets of the session they belong to."""

    sessions: dict[str, set[Connection]] = field(default_factory=dict)
    streamed: dict[str, str] = field(default_factory=dict)

    def attach(self, conn: Connection, session_id: str) -> None:
        conn.sessions.add(session_id)
        self.sessions.setdefault(session_id, set()).add(conn)

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
        if isinstance(event, StreamChunk):
            self.on_chunk(event)
        elif isinstance(event, Progress):
            self.on_progress(event)
        elif isinstance(event, RequestCompleted):
            self.on_completed(event)
        elif isinstance(event, RequestFailed):
            self.on_failed(event)

    def on_chunk(self, chunk: StreamChunk) -> None:
        self.streamed[chunk.request_id] = self.streamed.get(chunk.request_id, "") + chunk.text
        for conn in self._targets(chunk.session_id):
            frame: dict[str, Any] = {"on_chat_model_stream": chunk.text}
            if conn.events:
                frame["request_id"] = chunk.request_id
            conn.send(frame)

    def on_progress(self, p: Progress) -> None:
        for conn in self._targets(p.session_id):
            if conn.events:
                conn.send({"event": "progress", **p.model_dump(mode="json", exclude={"kind"})})

    def on_completed(self, done: RequestCompleted) -> None:
        already = self.streamed.pop(done.request_id, "")
        rest = done.output[len(already) :] if done.output.startswith(already) else done.output
        for conn in self._targets(done.session_id):
            if rest:
                frame: dict[str, Any] = {"on_chat_model_stream": rest}
                if conn.events:
                    frame["request_id"] = done.request_id
                conn.send(frame)
            conn.send(end_frame(conn, done))

    def on_failed(self, failed: RequestFailed) -> None:
        self.streamed.pop(failed.request_id, None)
        for conn in self._targets(failed.session_id):
            send_failure(conn, failed)


def end_frame(conn: Connection, done: RequestCompleted | RequestFailed) -> dict[str, Any]:
    frame: dict[str, Any] = {"on_chat_model_end": True}
    if conn.events:
        frame["request_id"] = done.request_id
        if isinstance(done, RequestCompleted):
            frame["status"] = done.status
            frame["metadata"] = done.model_dump(
                mode="json", exclude={"kind", "output", "event_id", "ts", "session_id"}
            )
        else:
            frame["status"] = "failed"
            frame["metadata"] = {"code": done.code, "error": done.error}
    return frame


def send_failure(conn: Connection, failed: RequestFailed) -> None:
    """An error frame, the error as text for clients that only read stream frames, and end."""
    error: dict[str, Any] = {"code": failed.code, "message": failed.error}
    if conn.events:
        error["request_id"] = failed.request_id
    conn.send({"error": error})
    if not conn.events:
        conn.send({"on_chat_model_stream": f"Sorry, I could not do that: {failed.error}"})
    conn.send(end_frame(conn, failed))
