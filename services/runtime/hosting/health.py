"""Readiness over the bus (contracts/health.py): every service replica answers a gateway's ping
with what it is subscribed to, and the gateway's `/readyz` is ready only when every service has
answered and every consumer the system needs is taken by some replica. A process that is merely
connected to NATS is not yet ready: it must have bound its consumers and run its start-up."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from faststream.nats import NatsBroker, NatsMessage
from pydantic import BaseModel, ValidationError

from contracts.channels import BEHIND_GATEWAY
from contracts.health import Ping, Pong, Readiness, ServiceHealth
from services.runtime.bus import poison, topology
from services.runtime.bus.core import Bus

log = logging.getLogger("sidekick.health")

INSTANCE = f"{socket.gethostname()}:{os.getpid()}"
M = TypeVar("M", bound=BaseModel)


def _heard(broker: NatsBroker, model: type[M], what: str) -> M | None:
    """The message being handled, read as `model`; None, and one warning naming it `what`,
    when it is not one (a ping or an answer is never worth an error)."""
    msg: NatsMessage = broker.context.get_local("message")
    try:
        return model.model_validate_json(msg.raw_message.data)
    except ValidationError as exc:
        data = msg.raw_message.data
        why = f"not a {what}: {poison.why(exc)}"
        poison.refused(msg.raw_message.subject, data, why, kind=what)
        return None


def subscribed_subjects(bus: Bus) -> list[str]:
    return sorted(set(bus.subscriptions()))


def answer_pings(
    bus: Bus, ready: Callable[[], bool], metrics_url: Callable[[], str | None]
) -> None:
    """Register this replica's answer to pings (before the broker starts)."""
    broker, s, service = bus.broker, bus.subjects, bus.service

    @broker.subscriber(s.ping, no_reply=True)
    async def on_ping() -> None:
        ping = _heard(broker, Ping, "ping")
        if ping is None:
            return
        pong = Pong(
            ping_id=ping.ping_id,
            service=service,
            instance=INSTANCE,
            ready=ready(),
            subjects=subscribed_subjects(bus),
            metrics_url=metrics_url(),
        )
        await bus.emit(pong, s.pong(service))


def needed_subjects(bus: Bus) -> dict[str, str]:
    """Every subject some replica must take for requests to flow, and the service that does:
    each durable consumer of the topology, for the worker kinds this system runs."""
    s = bus.subjects
    kinds = {k.lower() for k in bus.settings.worker_kinds}
    needed = {}
    for consumer, subject in topology.consumers(s).items():
        if consumer.startswith("worker_"):
            if consumer.removeprefix("worker_") not in kinds:
                continue
            needed[subject] = "workers"
        else:
            needed[subject] = consumer.split("_")[0]
    return needed


@dataclass
class Probe:
    """The gateway's side: sends a ping, gathers the answers, judges readiness."""

    bus: Bus
    timeout: float = 1.0
    _rounds: dict[str, tuple[list[Pong], asyncio.Event]] = field(default_factory=dict)

    def register(self) -> None:
        broker = self.bus.broker

        @broker.subscriber(self.bus.subjects.pong_all, no_reply=True)
        async def on_pong() -> None:
            pong = _heard(broker, Pong, "answer")
            if pong is None:
                return
            round_ = self._rounds.get(pong.ping_id)
            if round_ is not None:
                round_[0].append(pong)
                round_[1].set()

    async def check(self) -> Readiness:
        if not self.bus.connected:
            return Readiness(ready=False, nats="down", waiting_for=["nats"])
        ping = Ping()
        answers: list[Pong] = []
        arrived = asyncio.Event()
        self._rounds[ping.ping_id] = (answers, arrived)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        try:
            await self.bus.emit(ping, self.bus.subjects.ping)
            while True:
                report = self.judge(answers)
                left = deadline - loop.time()
                if report.ready or left <= 0:
                    return report
                arrived.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(arrived.wait(), left)
        finally:
            del self._rounds[ping.ping_id]

    def judge(self, answers: list[Pong]) -> Readiness:
        services: dict[str, ServiceHealth] = {}
        for name in BEHIND_GATEWAY:
            mine = [a for a in answers if a.service == name]
            services[name] = ServiceHealth(
                ready=any(a.ready for a in mine),
                replicas=len(mine),
                metrics_urls=sorted(a.metrics_url for a in mine if a.metrics_url),
            )
        taken = {subject for a in answers if a.ready for subject in a.subjects}
        waiting = [name for name, health in services.items() if not health.ready]
        waiting += [
            f"{service}: {subject}"
            for subject, service in needed_subjects(self.bus).items()
            if subject not in taken and service not in waiting
        ]
        return Readiness(
            ready=not waiting, nats="connected", services=services, waiting_for=waiting
        )
