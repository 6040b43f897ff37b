"""The WebSocket endpoint: authenticate, validate client frames, and turn them into requests,
answers to parked requests and cancels (through the core's `Intake.say`); a session's socket gets
what it missed while it was away (replay.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from pydantic import ValidationError
from starlette.responses import JSONResponse
from starlette.websockets import WebSocket, WebSocketDisconnect

from contracts import RequestRecord, new_id
from contracts.frames import (
    CLIENT_FRAME,
    AckEvent,
    AuthenticatedFrame,
    AuthFrame,
    CancelFrame,
    EndFrame,
    ErrorBody,
    ErrorCode,
    ErrorFrame,
    InitFrame,
    MessageFrame,
    QueuedEvent,
    ReadyEvent,
    RejectedMetadata,
    SessionFrame,
    in_kind,
)
from contracts.http import ErrorResponse
from services.gateway.core.auth import Auth
from services.gateway.core.errors import Busy, GatewayError
from services.gateway.core.hub import Hub
from services.gateway.core.intake import Intake, scoped
from services.gateway.core.said import (
    Accepted,
    Answered,
    Refused,
    Reply,
    Submission,
    Taken,
    TooLong,
    Words,
)
from services.gateway.ws.connection import Connection
from services.gateway.ws.replay import Replay
from services.runtime.base.metrics import GATEWAY_FRAMES_REJECTED
from services.runtime.bus.core import Bus
from services.runtime.walls import jsonlimits

__all__ = ["ChatSocket", "scoped"]

log = logging.getLogger("sidekick.gateway")

AUTH_TIMEOUT = 10.0
CLOSE_UNAUTHORIZED = 4401
CLOSE_IDLE = 4408
QUEUED_TEXT = (
    "Queued: I am still answering your previous message in this conversation; "
    "I will answer this one next."
)


class ChatSocket:
    def __init__(self, bus: Bus, hub: Hub[Connection], intake: Intake, auth: Auth) -> None:
        self.bus = bus
        self.hub = hub
        self.intake = intake
        self.auth = auth
        self.replays = Replay(bus, hub, intake)

    async def endpoint(self, ws: WebSocket) -> None:
        present, principal = self.auth.from_header(ws)
        if present and principal is None:
            await self._deny(ws)
            return
        await ws.accept()
        conn = Connection(ws, principal=principal or "anonymous", authenticated=bool(principal))
        self.hub.opened()
        watchdog = None if conn.authenticated else asyncio.create_task(self._auth_deadline(conn))
        settings = self.bus.settings
        first = True  # the first frame has ws_first_frame_timeout, later ones ws_idle_timeout
        try:
            while True:
                wait = settings.ws_first_frame_timeout if first else settings.ws_idle_timeout
                try:
                    # A deadline on this task, not wait_for's task per frame awaited.
                    async with asyncio.timeout(wait):
                        message = await ws.receive()
                except TimeoutError:
                    GATEWAY_FRAMES_REJECTED.labels("timeout").inc()
                    said = "no frame" if first else "no frame since the last"
                    await conn.close(CLOSE_IDLE, f"{said} for {wait:g} s")
                    break
                first = False
                if message["type"] == "websocket.disconnect":
                    break
                text = message.get("text")
                if text is None:
                    self.reject(conn, "invalid_frame", "Frames must be text (JSON), not binary.")
                else:
                    await self.on_frame(conn, text)
                if conn.closed:
                    break
        except WebSocketDisconnect:
            pass
        except Exception:
            log.exception("websocket handler failed")
        finally:
            self.hub.detach(conn)
            await conn.discard()
            if watchdog is not None:
                watchdog.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watchdog

    async def _deny(self, ws: WebSocket) -> None:
        """A wrong token in the Authorization header: refuse the handshake with 401."""
        GATEWAY_FRAMES_REJECTED.labels("unauthorized").inc()
        body = ErrorResponse(error=ErrorBody(code="unauthorized", message="Invalid bearer token."))
        if "websocket.http.response" in ws.scope.get("extensions", {}):
            await ws.send_denial_response(JSONResponse(body.wire(), status_code=401))
        else:
            await ws.close(code=CLOSE_UNAUTHORIZED)

    async def _auth_deadline(self, conn: Connection) -> None:
        await asyncio.sleep(AUTH_TIMEOUT)
        if not conn.authenticated:
            conn.spoke_auth = True  # it said nothing: it gets the error frame
            await self._unauthorized(conn, "No token was sent in time.")

    async def _unauthorized(self, conn: Connection, message: str) -> None:
        self.reject(conn, "unauthorized", message)
        conn.stop()  # nothing more is sent, but the error frame is written first
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1.0):
                await conn.flushed()
        await conn.close(CLOSE_UNAUTHORIZED, "unauthorized")

    async def on_frame(self, conn: Connection, text: str) -> None:
        limit = self.bus.settings.max_frame_bytes
        if len(text.encode()) > limit:
            return self.reject(conn, "frame_too_large", f"Frames are limited to {limit} bytes.")
        try:
            data = jsonlimits.loads(text)
        except jsonlimits.TooDeep as exc:
            return self.reject(conn, "invalid_json", f"The frame is {exc}.")
        except ValueError:
            return self.reject(conn, "invalid_json", "The frame is not valid JSON.")
        if not isinstance(data, dict):
            return self.reject(conn, "invalid_frame", "A frame must be a JSON object.")
        kind = in_kind(data)
        conn.spoke_auth = conn.spoke_auth or kind == "auth"
        if kind != "auth" and not conn.authenticated:
            return await self._unauthorized(
                conn, 'Authenticate first: send {"auth": "<token>"} or a Bearer header.'
            )
        if kind is None:
            return self.reject(
                conn,
                "invalid_frame",
                'Unknown frame: expected {"init": true, "uuid": ...}, {"uuid": ..., '
                '"message": ...} or {"cancel": "<request_id>"}.',
            )
        try:
            frame = CLIENT_FRAME.validate_python(data)
        except ValidationError as exc:
            return self.reject(conn, "invalid_frame", f"Invalid frame: {describe(exc)}")
        if isinstance(frame, AuthFrame):
            return await self.on_auth(conn, frame)
        if isinstance(frame, InitFrame):
            return await self.on_init(conn, frame)
        if isinstance(frame, MessageFrame):
            return await self.on_message(conn, frame)
        if isinstance(frame, SessionFrame):
            return await self.join(conn, scoped(conn.principal, frame.uuid))
        return await self.on_cancel(conn, frame)

    def reject(
        self, conn: Connection, code: ErrorCode, message: str, request_id: str | None = None
    ) -> None:
        """An error frame; an old client gets it as text and an end frame (the seed's client
        shows any key it does not know as raw JSON)."""
        GATEWAY_FRAMES_REJECTED.labels(code).inc()
        if not conn.error_frames:
            conn.notice(f"Sorry, I could not take that message: {message}")
        elif request_id is not None:
            conn.send(
                ErrorFrame(error=ErrorBody(code=code, message=message, request_id=request_id))
            )
        else:
            conn.send(ErrorFrame(error=ErrorBody(code=code, message=message)))

    def refuse(self, conn: Connection, exc: GatewayError, request_id: str | None) -> None:
        """A well-formed message that cannot be taken: the error, then an end frame, so a
        client waiting for the end of its turn is not left waiting."""
        self.reject(conn, exc.code, exc.message, request_id)
        if not conn.error_frames:
            return  # the notice was a whole turn: text and its end
        if request_id is not None:
            rejected = RejectedMetadata(code=exc.code)
            conn.send(
                EndFrame(
                    on_chat_model_end=True,
                    request_id=request_id,
                    status="rejected",
                    metadata=rejected,
                )
            )
        else:
            conn.send(EndFrame(on_chat_model_end=True))

    async def on_auth(self, conn: Connection, frame: AuthFrame) -> None:
        principal = self.auth.principal(frame.auth)
        if principal is None or (conn.authenticated and principal != conn.principal):
            return await self._unauthorized(conn, "Invalid token.")
        conn.principal, conn.authenticated = principal, True
        conn.send(AuthenticatedFrame(authenticated=True, principal=principal))

    async def on_init(self, conn: Connection, frame: InitFrame) -> None:
        conn.events = conn.events or frame.events
        conn.if_busy = frame.if_busy or conn.if_busy
        if frame.uuid is None:
            if conn.events:
                conn.send(ReadyEvent(event="ready", uuid=""))
            return
        session_id = scoped(conn.principal, frame.uuid)
        conn.session = session_id
        await self.hub.attach(conn, session_id)
        if conn.events:
            conn.send(ReadyEvent(event="ready", uuid=frame.uuid))
        await self.replays.replay(conn, session_id)

    async def join(self, conn: Connection, session_id: str) -> None:
        """Make `session_id` the socket's session (a frame named it), replaying what it missed
        the first time this socket joins it."""
        conn.session = session_id
        if await self.hub.attach(conn, session_id):
            await self.replays.replay(conn, session_id)

    async def on_message(self, conn: Connection, frame: MessageFrame) -> None:
        text = message_text(frame)
        if not text:
            return self.reject(conn, "invalid_frame", "The message has no user content.")
        if frame.uuid is not None:
            await self.join(conn, scoped(conn.principal, frame.uuid))
        if conn.session is None:
            return self.reject(
                conn, "not_initialised", 'Say which session first: {"init": true, "uuid": ...}.'
            )
        if_busy = frame.if_busy or conn.if_busy
        request_id = frame.request_id or new_id()
        # Interrupting cancels a parked question too: the message is a new request, whatever
        # it replies to.
        interrupt = if_busy == "interrupt"
        to: Submission | Reply = (
            Reply(frame.reply_to)
            if frame.reply_to is not None and not interrupt
            else Submission(
                request_id,
                chosen=frame.request_id is not None,
                success_criteria=frame.success_criteria,
                use_evaluator=frame.use_evaluator,
                skip_cache=frame.skip_cache,
                if_busy=if_busy,
                on_parked="new" if interrupt else "answer",
            )
        )

        def taken(said: Taken) -> None:
            # Told by the intake before the request can go on, so no frame of it comes first.
            if isinstance(said, Answered):
                if conn.events:
                    conn.send(AckEvent(event="ack", request_id=said.request_id, action="answer"))
                return
            if conn.events:
                conn.send(AckEvent(event="ack", request_id=said.request_id, action="message"))
            if said.behind is None:
                return
            if conn.events:
                queued = QueuedEvent(
                    event="queued",
                    request_id=said.request_id,
                    behind=said.behind,
                    position=said.position,
                )
                conn.send(queued)
            else:
                conn.notice(QUEUED_TEXT)

        words = Words(text, approval_id=frame.approval_id)
        said = await self.intake.say(
            conn.principal, conn.session, words, to=to, surface="ws", taken=taken
        )
        if isinstance(said, TooLong):
            return self.reject(conn, "message_too_long", said.message)
        if isinstance(said, Refused):
            return self.refuse(
                conn, refusal(said), frame.reply_to if said.answering else said.request_id
            )
        if isinstance(said, Answered):
            await self.hub.attach(conn, said.record.session_id)
        elif isinstance(said, Accepted) and not said.fresh:
            # A retried id: answer from the stored outcome if it already ended.
            await self.replays.stored(conn, said.request_id)

    async def on_cancel(self, conn: Connection, frame: CancelFrame) -> None:
        async def hold(status: RequestRecord) -> None:
            await self.hub.attach(conn, status.session_id)

        try:
            await self.intake.cancel(conn.principal, frame.cancel, before=hold)
        except GatewayError as exc:
            return self.reject(conn, exc.code, exc.message, frame.cancel)
        if conn.events:
            conn.send(AckEvent(event="ack", request_id=frame.cancel, action="cancel"))


def message_text(frame: MessageFrame) -> str:
    """The user's message: the text, or the last user message of a conversation (as the seed's
    server takes it)."""
    if isinstance(frame.message, str):
        return frame.message
    users = [m.content for m in frame.message if m.role == "user"]
    return users[-1].strip() if users else ""


def describe(exc: ValidationError) -> str:
    # The first element of a location is the union's tag (which frame), not a field.
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc'][1:]) or 'frame'}: {e['msg']}" for e in exc.errors()[:5]
    )


def refusal(said: Refused) -> GatewayError:
    """A refusal in this protocol's words: `reject` says how to send again."""
    error = said.error
    if isinstance(error, Busy) and error.active is not None:
        return Busy(
            f"This conversation is still answering request {error.active}; send again "
            'when it ends, or with "if_busy": "enqueue" or "interrupt".',
            error.active,
        )
    return error
