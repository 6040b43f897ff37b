"""Composition root of the evaluator service."""

from __future__ import annotations

from contracts import EvaluationRequested
from services.evaluator.handlers import Evaluator
from services.runtime.base.settings import Settings
from services.runtime.bus.core import Bus
from services.runtime.hosting.host import ServiceHost, make_broker
from services.runtime.llm import LLMClient


def build(settings: Settings) -> ServiceHost:
    bus = Bus(make_broker(settings, "evaluator"), settings, "evaluator")
    evaluator = Evaluator(bus, LLMClient.for_role(settings, "evaluator"))
    bus.consume(bus.subjects.evaluator_run, EvaluationRequested, evaluator, consumer="evaluator")
    return ServiceHost("evaluator", settings, bus)
