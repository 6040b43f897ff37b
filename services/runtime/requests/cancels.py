"""Hearing cancellations: every replica of a service subscribes (core NATS, no queue group) to
the cancel subject, which the gateway publishes on JetStream for the orchestrator's durable
consumer; core subscribers see the same message. For requests whose cancel arrived before this
process started, the orchestrator leaves a flag in the ledger bucket (`flag()`), which every
service that checks may read (workers may not read the request records themselves)."""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from datetime import datetime, timedelta

import nats.js.errors
from faststream.nats import NatsMessage
from pydantic import ValidationError

from contracts import CancelRequested
from services.runtime.base.metrics import CANCELLATIONS
from services.runtime.bus.core import Bus
from services.runtime.bus.kvstore import key_for

log = logging.getLogger("sidekick.cancel")

REMEMBER = 10_000
# How far apart two hosts' clocks may be, for `check` (work asked for on another host).
CLOCK_SKEW = timedelta(seconds=10)


class Cancellations:
    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.seen: OrderedDict[str, str] = OrderedDict()
        self.running: dict[str, set[asyncio.Task[object]]] = {}

        # no_reply: the cancel is published on JetStream, so it carries the publisher's ack
        # inbox; answering it would race the server's PubAck (NATS permissions forbid it).
        @bus.broker.subscriber(bus.subjects.request_cancel, no_reply=True)
        async def on_cancel(msg: NatsMessage) -> None:
            try:
                event = CancelRequested.model_validate_json(msg.raw_message.data)
            except ValidationError:
                return
            self.mark(event.request_id, event.reason)

    def mark(self, request_id: str, reason: str) -> None:
        self.seen[request_id] = reason
        while len(self.seen) > REMEMBER:
            self.seen.popitem(last=False)
        for task in self.running.get(request_id, set()):
            CANCELLATIONS.labels(self.bus.service).inc()
            task.cancel()

    def is_set(self, request_id: str) -> bool:
        return request_id in self.seen

    async def check(self, request_id: str, issued: datetime | None = None) -> bool:
        """True if the request was cancelled (here, or before this process heard of it).
        `issued`: when the work was asked for; a cancel of work asked for well after this
        process began listening would have been heard here, so the ledger is not asked."""
        if request_id in self.seen:
            return True
        since = self.bus.listening_since()
        if issued is not None and since is not None and issued > since + CLOCK_SKEW:
            return False
        try:
            await self.bus.kv.ledger.get(flag_key(request_id))
        except nats.js.errors.KeyNotFoundError:
            return False
        return True

    async def run(self, request_id: str, work: asyncio.Task[object]) -> bool:
        """Await `work`; False if it was stopped because its request was cancelled."""
        self.running.setdefault(request_id, set()).add(work)
        try:
            await work
        except asyncio.CancelledError:
            if request_id in self.seen and not _current_cancelling():
                return False
            raise
        finally:
            tasks = self.running.get(request_id)
            if tasks is not None:
                tasks.discard(work)
                if not tasks:
                    del self.running[request_id]
        return True


def _current_cancelling() -> bool:
    task = asyncio.current_task()
    return bool(task and task.cancelling())


def flag_key(request_id: str) -> str:
    return "cancelled." + key_for(request_id)


async def flag(bus: Bus, request_id: str, reason: str) -> None:
    """Remember, for services that start work later, that the request was cancelled."""
    await bus.kv.ledger.put(flag_key(request_id), reason.encode()[:500])
