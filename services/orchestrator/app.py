"""Composition root of the orchestrator service."""

from __future__ import annotations

from contracts import RequestRouted, VerdictIssued, WorkerResult
from services.orchestrator.handlers import Orchestrator
from services.runtime.bus import Bus
from services.runtime.host import ServiceHost, make_broker
from services.runtime.llm import LLMClient
from services.runtime.settings import Settings


def build(settings: Settings) -> ServiceHost:
    bus = Bus(make_broker(settings, "orchestrator"), settings, "orchestrator")
    llm = LLMClient(
        settings.llm("orchestrator"),
        timeout=settings.llm_timeout,
        max_retries=settings.llm_max_retries,
    )
    orch = Orchestrator(bus, llm, settings.worker_kinds)
    s = bus.subjects
    bus.durable(
        s.request_routed,
        RequestRouted,
        orch.on_routed,
        consumer="orchestrator_routed",
        on_exhausted=orch.exhausted_routed,
    )
    bus.durable(
        s.worker_completed,
        WorkerResult,
        orch.on_result,
        consumer="orchestrator_results",
        on_exhausted=orch.exhausted_result,
    )
    bus.durable(
        s.evaluation_completed,
        VerdictIssued,
        orch.on_verdict,
        consumer="orchestrator_verdicts",
        on_exhausted=orch.exhausted_verdict,
    )
    return ServiceHost("orchestrator", settings, bus)
