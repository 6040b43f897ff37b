"""Composition root of the frontline service."""

from __future__ import annotations

from contracts import ChatRequested
from services.frontline.handlers import Frontline
from services.runtime.base.settings import Settings
from services.runtime.bus.core import Bus
from services.runtime.hosting.host import ServiceHost, make_broker
from services.runtime.llm import LLMClient
from services.runtime.requests.cancels import Cancellations


def build(settings: Settings) -> ServiceHost:
    bus = Bus(make_broker(settings, "frontline"), settings, "frontline")
    frontline = Frontline(bus, LLMClient.for_role(settings, "frontline"), Cancellations(bus))
    bus.consume(bus.subjects.chat_requested, ChatRequested, frontline, consumer="frontline")
    # A clean stop writes the spend its leases batched and returns them (budgets/leases.py).
    return ServiceHost("frontline", settings, bus, on_stop=[frontline.budget.drain])
