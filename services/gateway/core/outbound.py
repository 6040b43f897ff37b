"""Client-bound events, from the bus to the hub.

Every gateway replica hears every client-bound event (core NATS, no queue group) on one
subscription, so chunks, progress and the end arrive in the order they were published, and
delivers each to the sockets and callers it holds for that request. A plain NATS subscription:
these are the busiest messages of all (a reply's chunks), and the gateway only routes them; a
consume span and the broker's metrics each cost more than that. Events published on JetStream
carry the publisher's ack inbox as reply subject; it is never answered (that would race the
server's PubAck, and NATS permissions forbid it).

On the way: an end frees its request's place in the limits, and a worker's step is written into
the request's record (workers may not write records themselves)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from nats.aio.msg import Msg
from pydantic import ValidationError

from contracts import OUTCOMES, Progress, parse_event
from services.gateway.core.hub import Hub
from services.gateway.core.limits import Limits
from services.runtime.base.metrics import GATEWAY_EVENTS
from services.runtime.bus import poison
from services.runtime.bus.core import Bus
from services.runtime.requests.outcomes import record_step

log = logging.getLogger("sidekick.gateway")


class Outbound:
    def __init__(self, bus: Bus, hub: Hub[Any], limits: Limits) -> None:
        self.bus = bus
        self.hub = hub
        self.limits = limits
        self._tasks: set[asyncio.Task[None]] = set()

    def listen(self) -> None:
        self.bus.listen(self.bus.subjects.out_all, self.on_out)

    async def on_out(self, msg: Msg) -> None:
        try:
            event = parse_event(msg.data)
        except ValidationError as exc:
            poison.refused(msg.subject, msg.data, poison.why(exc), kind=self.bus.subjects.out_all)
            return
        GATEWAY_EVENTS.labels(event.kind).inc()
        if isinstance(event, OUTCOMES):
            self.limits.release(event.request_id)
        elif isinstance(event, Progress) and event.workflow_status is not None:
            self._background(self.on_step(event))
        self.hub.dispatch(event)

    async def on_step(self, step: Progress) -> None:
        """A worker's step (researching, synthesizing, ...) into the request's record. Every
        replica hears it; the write is a no-op but once."""
        assert step.workflow_status is not None
        try:
            await record_step(self.bus, step.request_id, step.workflow_status, step.detail)
        except Exception as exc:
            log.warning("could not record a step of %s: %r", step.request_id, exc)

    def _background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
