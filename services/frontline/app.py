"""Composition root of the frontline service."""

from __future__ import annotations

from contracts import ChatRequested
from services.frontline.handlers import Frontline
from services.runtime.bus import Bus
from services.runtime.cancels import Cancellations
from services.runtime.host import ServiceHost, make_broker
from services.runtime.llm import LLMClient
from services.runtime.settings import Settings


def build(settings: Settings) -> ServiceHost:
    bus = Bus(make_broker(settings, "frontline"), settings, "frontline")
    llm = LLMClient(
        settings.llm("frontline"),
        timeout=settings.llm_timeout,
        max_retries=settings.llm_max_retries,
    )
    frontline = Frontline(bus, llm, Cancellations(bus))
    bus.durable(
        bus.subjects.chat_requested,
        ChatRequested,
        frontline.handle,
        consumer="frontline",
        on_exhausted=frontline.exhausted,
    )
    return ServiceHost("frontline", settings, bus)
