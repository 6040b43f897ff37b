"""The WebSocket endpoint: validate client frames, acknowledge, publish ChatRequested."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

from pydantic import ValidationError
from starlette.websockets import WebSocket, WebSocketDisconnect

from contracts import (
    ChatRequested,
    RequestCompleted,
    RequestFailed,
    RequestStatus,
    new_id,
    parse_event,
)
from contracts.client import ErrorCode, InitFrame, MessageFrame
from services.gateway.hub import Connection, Hub, end_frame, send_failure
from services.runtime.bus import Bus, msg_id
from services.runtime.metrics import GATEWAY_FRAMES_REJECTED
from services.runtime.outcomes import create_status

log = logging.getLogger("sidekick.gateway")


def scoped(principal: str, uuid: str) -> str:
    """A client's uuid is only meaningful under its principal."""
    return f"{principal}/{uuid}"


class ChatSocket:
    def __init__(self, bus: Bus, hub: Hub) -> None:
        self.bus = bus
        self.hub = hub

    async def endpoint(self, ws: WebSocket) -> None:
        await ws.accept()
        conn = Connection(ws)
        self.hub.opened()
        writer = asyncio.create_task(conn.writer())
        try:
            while True:
                text = await ws.receive_text()
                await self.on_frame(conn, text)
        except WebSocketDisconnect:
            pass
        except Exception:
            log.exception("websocket handler failed")
        finally:
            self.hub.detach(conn)
            writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await writer

    async def on_frame(self, conn: Connection, text: str) -> None:
        limit = self.bus.settings.max_frame_bytes
        if len(text.encode()) > limit:
            return self.reject(conn, "frame_too_large", f"Frames are limited to {limit} bytes.")
        try:
            data = json.loads(text)
        except ValueError:
            return self.reject(conn, "invalid_json", "The frame is not valid JSON.")
        if not isinstance(data, dict):
            return self.reject(conn, "invalid_frame", "A frame must be a JSON object.")
        try:
            if data.get("init") is True:
                return self.on_init(conn, InitFrame.model_validate(data))
            if "message" in data:
                return await self.on_message(conn, MessageFrame.model_validate(data))
        except ValidationError as exc:
            detail = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'frame'}: {e['msg']}"
                for e in exc.errors()[:5]
            )
            return self.reject(conn, "invalid_frame", f"Invalid frame: {detail}")
        return self.reject(
            conn,
            "invalid_frame",
            'Unknown frame: expected {"init": true, "uuid": ...} or {"uuid": ..., "message": ...}.',
        )

    def reject(self, conn: Connection, code: ErrorCode, message: str) -> None:
        GATEWAY_FRAMES_REJECTED.labels(code).inc()
        conn.send({"error": {"code": code, "message": message}})

    def on_init(self, conn: Connection, frame: InitFrame) -> None:
        conn.events = conn.events or frame.events
        self.hub.attach(conn, scoped(conn.principal, frame.uuid))
        if conn.events:
            conn.send({"event": "ready", "uuid": frame.uuid})

    async def on_message(self, conn: Connection, frame: MessageFrame) -> None:
        session_id = scoped(conn.principal, frame.uuid)
        self.hub.attach(conn, session_id)
        request_id = frame.request_id or new_id()
        if frame.request_id and await self._replay(conn, request_id):
            return
        event = ChatRequested(
            request_id=request_id,
            session_id=session_id,
            message=frame.message,
            success_criteria=frame.success_criteria,
            use_evaluator=frame.use_evaluator,
            skip_cache=frame.skip_cache,
            principal=conn.principal,
            reply_to=frame.reply_to,
        )
        try:
            await create_status(
                self.bus,
                RequestStatus(
                    request_id=request_id,
                    session_id=session_id,
                    principal=conn.principal,
                    text=frame.message,
                    success_criteria=frame.success_criteria,
                    status="queued",
                ),
            )
            await self.bus.publish(
                event, self.bus.subjects.chat_requested, dedupe_key=msg_id(request_id, "requested")
            )
        except Exception as exc:
            log.warning("could not accept a message: %r", exc)
            conn.send(
                {
                    "error": {
                        "code": "unavailable",
                        "message": "Sidekick could not accept the "
                        "message (the bus is unavailable); please retry.",
                    }
                }
            )
            conn.send({"on_chat_model_end": True})
            return
        if conn.events:
            conn.send({"event": "ack", "request_id": request_id})

    async def _replay(self, conn: Connection, request_id: str) -> bool:
        """A retried request that already ended gets its stored answer instead of a rerun."""
        try:
            entry = await self.bus.kv.results.get(request_id)
        except Exception:
            return False
        if not entry.value:
            return False
        done = parse_event(entry.value)
        if isinstance(done, RequestCompleted):
            frame: dict[str, Any] = {"on_chat_model_stream": done.output}
            if conn.events:
                frame["request_id"] = request_id
            conn.send(frame)
            conn.send(end_frame(conn, done))
        elif isinstance(done, RequestFailed):
            send_failure(conn, done)
        return True
