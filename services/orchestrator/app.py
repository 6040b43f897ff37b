"""Composition root of the orchestrator service."""

from __future__ import annotations

from faststream.nats import NatsMessage

from contracts import (
    CancelRequested,
    ClarificationAnswered,
    RequestRouted,
    VerdictIssued,
    WorkerResult,
)
from services.orchestrator.cache import SemanticCache
from services.orchestrator.handlers import Orchestrator
from services.orchestrator.parking import ParkingLot
from services.runtime.base.settings import LLMConfig, Role, Settings
from services.runtime.bus.core import Bus
from services.runtime.hosting.host import ServiceHost, make_broker
from services.runtime.llm import LLMClient


def build(settings: Settings) -> ServiceHost:
    broker = make_broker(settings, "orchestrator")
    bus = Bus(broker, settings, "orchestrator")

    def client(role: Role) -> LLMClient:
        config = settings.llm(role)
        if role == "embeddings" and not settings.cache_enabled:
            config = LLMConfig("embeddings", None, None, config.model)  # cache off
        return LLMClient(config, timeout=settings.llm_timeout, max_retries=settings.llm_max_retries)

    cache = SemanticCache(bus, client("embeddings"), settings.cache_threshold)
    parking = ParkingLot(settings.sweep_interval)
    orch = Orchestrator(bus, client("orchestrator"), settings.worker_kinds, cache, parking)
    s = bus.subjects
    durable = [
        (s.request_routed, RequestRouted, orch.on_routed, "routed"),
        (s.worker_completed, WorkerResult, orch.on_result, "results"),
        (s.evaluation_completed, VerdictIssued, orch.on_verdict, "verdicts"),
        (s.request_answered, ClarificationAnswered, orch.on_answered, "answers"),
        (s.request_cancel, CancelRequested, orch.on_cancel, "cancels"),
    ]
    for subject, model, handler, name in durable:
        bus.durable(
            subject,
            model,  # type: ignore[arg-type]
            handler,  # type: ignore[arg-type]
            consumer=f"orchestrator_{name}",
            on_exhausted=orch.exhausted,
        )

    # A message that ran out of deliveries while its handler never finished (the process was
    # killed on the last one) is announced by the server; one replica handles each.
    @broker.subscriber(
        f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{s.work_stream}.*", queue="orchestrator"
    )
    async def on_advisory(msg: NatsMessage) -> None:
        await orch.on_dead_letter_advisory(msg.raw_message.data)

    async def ready() -> None:
        await cache.start()
        parking.start(await bus.bucket("parked"), orch.on_parked_timeout, orch.on_parked_waiting)

    async def stop() -> None:
        await parking.stop()
        await cache.stop()
        await orch.budget.drain()  # the spend its leases batched written, the leases returned

    return ServiceHost("orchestrator", settings, bus, on_ready=[ready], on_stop=[stop])
