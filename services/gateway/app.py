"""Composition root of the gateway service."""

from __future__ import annotations

import logging

from faststream.nats import NatsMessage
from pydantic import ValidationError
from starlette.routing import WebSocketRoute

from contracts import parse_event
from services.gateway.hub import Hub
from services.gateway.outbox import outbox_route
from services.gateway.ws import ChatSocket
from services.runtime.bus import Bus
from services.runtime.host import ServiceHost, make_broker
from services.runtime.settings import Settings

log = logging.getLogger("sidekick.gateway")


def build(settings: Settings) -> ServiceHost:
    broker = make_broker(settings, "gateway")
    bus = Bus(broker, settings, "gateway")
    hub = Hub()
    s = bus.subjects

    # Every gateway replica hears every client-bound event (core NATS, no queue group) on one
    # subscription, so chunks, progress and the end arrive in the order they were published,
    # and delivers each to the sockets it holds for that session.
    @broker.subscriber(s.out_all)
    async def on_out(msg: NatsMessage) -> None:
        try:
            event = parse_event(msg.raw_message.data)
        except ValidationError:
            log.warning("dropping an unreadable event on %s", msg.raw_message.subject)
            return
        hub.dispatch(event)

    return ServiceHost(
        "gateway",
        settings,
        bus,
        routes=[WebSocketRoute("/ws", ChatSocket(bus, hub).endpoint), outbox_route(bus)],
        host=settings.gateway_host,
        port=settings.gateway_port,
    )
