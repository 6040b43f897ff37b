"""Composition root of the evaluator service."""

from __future__ import annotations

from contracts import EvaluationRequested
from services.evaluator.handlers import Evaluator
from services.runtime.bus import Bus
from services.runtime.host import ServiceHost, make_broker
from services.runtime.llm import LLMClient
from services.runtime.settings import Settings


def build(settings: Settings) -> ServiceHost:
    bus = Bus(make_broker(settings, "evaluator"), settings, "evaluator")
    llm = LLMClient(
        settings.llm("evaluator"),
        timeout=settings.llm_timeout,
        max_retries=settings.llm_max_retries,
    )
    evaluator = Evaluator(bus, llm)
    bus.durable(
        bus.subjects.evaluator_run,
        EvaluationRequested,
        evaluator.handle,
        consumer="evaluator",
        on_exhausted=evaluator.exhausted,
    )
    return ServiceHost("evaluator", settings, bus)
