"""Where the gateway's client-bound events go: to the sockets that hold the event's session, and
to the HTTP callers waiting on its request. How an event looks to a socket is the socket's own
business (the WebSocket surface's Connection); the hub only routes, in the order published.
What a socket or a caller holds, the gateway hears (`Taps`: services/gateway/core/outbound.py
subscribes to each session held, and to nothing else)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from contracts import OUTCOMES, AnyEvent, Outcome, Progress, StreamChunk
from services.runtime.base.metrics import WS_CONNECTIONS


class Socket(Protocol):
    """A client socket as the hub sees it: the sessions it holds, and what it does with each
    kind of event (a WebSocket renders them as its client's frames)."""

    sessions: set[str]

    def stop(self) -> None:
        """Take no more frames."""

    def chunk(self, chunk: StreamChunk) -> None:
        """A piece of the answer being streamed."""

    def progress(self, p: Progress) -> None:
        """A step of the request."""

    def outcome(self, event: Outcome, already: str) -> bool:
        """The request's end (or question), after `already` was streamed live; True when this
        socket was given it now (not closed, and not given it before)."""


S = TypeVar("S", bound=Socket)


class Taps(Protocol):
    """What makes the gateway hear a session's events while something holds it."""

    async def hold(self, session_id: str) -> None: ...

    def release(self, session_id: str) -> None: ...


class _Deaf:
    """No taps (a hub on its own): every session is heard, or none is; nothing to do."""

    async def hold(self, session_id: str) -> None:
        return None

    def release(self, session_id: str) -> None:
        return None


@dataclass
class Hub(Generic[S]):
    """Routes bus events to the sockets of the session they belong to. Session ids are scoped
    by principal ("alice/<uuid>"), so one principal's events never reach another's sockets."""

    sessions: dict[str, set[S]] = field(default_factory=dict)
    streamed: dict[str, str] = field(default_factory=dict)
    # Called with (session_id, request_id) when an outcome reached at least one socket live.
    on_delivered: Callable[[str, str], None] | None = None
    # Called with a session's id when its last socket here has gone.
    on_left: Callable[[str], None] | None = None
    # HTTP callers waiting on one request (the workflow chat, /v1/chat/completions).
    watchers: dict[str, set[asyncio.Queue[AnyEvent]]] = field(default_factory=dict)
    taps: Taps = field(default_factory=_Deaf)

    @contextlib.asynccontextmanager
    async def watch(
        self, request_id: str, session_id: str
    ) -> AsyncIterator[asyncio.Queue[AnyEvent]]:
        """Every client-bound event of one request of `session_id`, in order, while the block
        runs (enter it before the request is sent, so nothing is missed)."""
        queue: asyncio.Queue[AnyEvent] = asyncio.Queue()
        await self.taps.hold(session_id)
        self.watchers.setdefault(request_id, set()).add(queue)
        try:
            yield queue
        finally:
            queues = self.watchers.get(request_id, set())
            queues.discard(queue)
            if not queues:
                self.watchers.pop(request_id, None)
            self.taps.release(session_id)

    async def attach(self, conn: S, session_id: str) -> bool:
        """Attach (the gateway hears the session from now on); True if the socket was not yet
        attached to this session."""
        new = session_id not in conn.sessions
        if new:
            await self.taps.hold(session_id)
        conn.sessions.add(session_id)
        self.sessions.setdefault(session_id, set()).add(conn)
        return new

    def opened(self) -> None:
        WS_CONNECTIONS.inc()

    def detach(self, conn: S) -> None:
        WS_CONNECTIONS.dec()
        conn.stop()
        for sid in conn.sessions:
            self.taps.release(sid)
            conns = self.sessions.get(sid)
            if conns is not None:
                conns.discard(conn)
                if not conns:
                    del self.sessions[sid]
                    if self.on_left is not None:
                        self.on_left(sid)

    def _targets(self, session_id: str) -> set[S]:
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
            conn.chunk(chunk)

    def on_progress(self, p: Progress) -> None:
        for conn in self._targets(p.session_id):
            conn.progress(p)

    def on_outcome(self, event: Outcome) -> None:
        already = self.streamed.pop(event.request_id, "")
        delivered = False
        for conn in list(self._targets(event.session_id)):
            if conn.outcome(event, already):
                delivered = True
        if delivered and self.on_delivered is not None:
            self.on_delivered(event.session_id, event.request_id)
