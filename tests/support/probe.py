"""Talking to the bus directly, as the gateway does: accept a request (its record and the
publish), answer and cancel it, and watch what comes back for it. Lets service-side tests run
without a gateway. The records are written through the lifecycle, as the gateway's own."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from contracts import (
    CancelRequested,
    ChatRequested,
    ClarificationAnswered,
    Model,
    RequestRecord,
    Subjects,
    new_id,
)
from services.runtime.requests.lifecycle import IllegalMove, Requests


class Probe:
    def __init__(self, nc: NATS, namespace: str) -> None:
        self.nc = nc
        self.js = nc.jetstream()
        self.s = Subjects(namespace)
        self.events: dict[str, list[dict[str, Any]]] = {}
        self.ended_at: dict[str, float] = {}
        self._sub: Any = None

    async def start(self) -> Probe:
        async def on_msg(msg: Msg) -> None:
            data = json.loads(msg.data)
            self.events.setdefault(data["request_id"], []).append(data)
            if data["kind"] in ("request.completed", "request.failed", "request.cancelled"):
                self.ended_at.setdefault(data["request_id"], time.monotonic())

        self._sub = await self.nc.subscribe(self.s.out_all, cb=on_msg)
        return self

    async def stop(self) -> None:
        if self._sub is not None:
            await self._sub.unsubscribe()

    async def __aenter__(self) -> Probe:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def publish(self, event: Model, subject: str, msg_id: str) -> bool:
        """Publish on JetStream; True if the server stored it, False if it was a duplicate."""
        ack = await self.js.publish(
            subject, event.model_dump_json().encode(), headers={"Nats-Msg-Id": msg_id}
        )
        return not ack.duplicate

    async def ask(self, message: str, **fields: Any) -> str:
        request_id = fields.pop("request_id", None) or new_id()
        session_id = fields.pop("session_id", None) or "anonymous/" + new_id()[:8]
        event = ChatRequested(
            request_id=request_id, session_id=session_id, message=message, **fields
        )
        await self.accept(event)
        await self.publish(event, self.s.chat_requested, f"{request_id}:requested")
        return request_id

    async def accept(self, event: ChatRequested) -> None:
        """Create the request's record, as the gateway does before it publishes."""
        record = RequestRecord(
            request_id=event.request_id,
            session_id=event.session_id,
            principal=event.principal,
            text=event.message,
            status="queued",
        )
        await (await self.requests()).create(record)

    async def requests(self) -> Requests:
        return Requests(await self.js.key_value(self.s.status_bucket), "gateway")

    async def answer(self, request_id: str, session_id: str, **fields: Any) -> None:
        """Accept the answer as the gateway does, and pass it on even when the request is not
        waiting (so tests can check what the orchestrator makes of a stray answer)."""
        with contextlib.suppress(IllegalMove):
            await (await self.requests()).move(request_id, "decided", clarification_questions=[])
        event = ClarificationAnswered(request_id=request_id, session_id=session_id, **fields)
        await self.publish(event, self.s.request_answered, f"{request_id}:answered:{new_id()}")

    async def cancel(self, request_id: str, session_id: str) -> None:
        event = CancelRequested(request_id=request_id, session_id=session_id)
        await self.publish(event, self.s.request_cancel, f"{request_id}:cancel")

    def kinds(self, request_id: str) -> list[str]:
        return [e["kind"] for e in self.events.get(request_id, [])]

    async def wait_kind(self, request_id: str, *kinds: str, timeout: float = 60) -> dict[str, Any]:
        async def seen() -> dict[str, Any]:
            while True:
                for e in self.events.get(request_id, []):
                    if e["kind"] in kinds:
                        return e
                await asyncio.sleep(0.02)

        return await asyncio.wait_for(seen(), timeout)

    async def status(self, request_id: str) -> RequestRecord:
        tracked = await (await self.requests()).load(request_id)
        assert tracked is not None, f"no record of {request_id}"
        return tracked.value
