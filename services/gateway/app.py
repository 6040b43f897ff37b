"""Composition root of the gateway service: the web page at `/`, the WebSocket `/ws`, the
workflows and page APIs under `/api`, health and metrics."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from nats.aio.msg import Msg
from pydantic import ValidationError
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from contracts import OUTCOMES, Progress, parse_event
from services.gateway.a2a.rpc import A2AApi
from services.gateway.agui.endpoint import AgUiApi
from services.gateway.api import PageApi, cors, guarded, meta_routes
from services.gateway.approvals_api import ApprovalsApi
from services.gateway.auth import Auth, AuthConfigError
from services.gateway.catchup import CatchUp
from services.gateway.deliveries import Deliveries
from services.gateway.feed import Feed
from services.gateway.hub import Hub
from services.gateway.intake import Intake
from services.gateway.limits import Limits
from services.gateway.openai_api import OpenAIApi
from services.gateway.origins import OriginPolicy
from services.gateway.preferences import PreferencesApi, PreferenceStore
from services.gateway.workflows import Workflows
from services.gateway.ws import ChatSocket
from services.runtime.base.metrics import GATEWAY_EVENTS
from services.runtime.base.settings import Settings
from services.runtime.bus import poison
from services.runtime.bus.core import Bus
from services.runtime.hosting.health import Probe
from services.runtime.hosting.host import ServiceHost, make_broker
from services.runtime.requests.outcomes import record_step

log = logging.getLogger("sidekick.gateway")

STATIC = Path(__file__).parent / "static"
# The page loads only its own files and talks only to its own origin.
PAGE_HEADERS = {
    "content-security-policy": "default-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-cache",
}


def build(settings: Settings) -> ServiceHost:
    try:
        auth = Auth.from_settings(settings)
    except AuthConfigError as exc:  # e.g. an unauthenticated bind on a public address
        raise SystemExit(f"gateway: {exc}") from exc
    broker = make_broker(settings, "gateway")
    bus = Bus(broker, settings, "gateway")
    limits = Limits(settings.rate_limit_per_minute, settings.max_concurrent_requests)
    deliveries = Deliveries(bus)
    intake = Intake(bus, limits, deliveries)
    hub = Hub()
    tasks: set[asyncio.Task[None]] = set()
    s = bus.subjects

    hub.on_delivered = deliveries.seen

    def background(work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    async def on_step(step: Progress) -> None:
        """A worker's step (researching, synthesizing, ...) into the request's record: workers
        may not write records themselves. Every replica hears it; the write is a no-op but once."""
        assert step.workflow_status is not None
        try:
            await record_step(bus, step.request_id, step.workflow_status, step.detail)
        except Exception as exc:
            log.warning("could not record a step of %s: %r", step.request_id, exc)

    # Every gateway replica hears every client-bound event (core NATS, no queue group) on one
    # subscription, so chunks, progress and the end arrive in the order they were published,
    # and delivers each to the sockets it holds for that session. A plain NATS subscription:
    # these are the busiest messages of all (a reply's chunks), and the gateway only routes
    # them to sockets; a consume span and the broker's metrics each cost more than that.
    # Events published on JetStream carry the publisher's ack inbox as reply subject; it is
    # never answered (that would race the server's PubAck, and NATS permissions forbid it).
    async def on_out(msg: Msg) -> None:
        try:
            event = parse_event(msg.data)
        except ValidationError as exc:
            poison.refused(msg.subject, msg.data, poison.why(exc), kind=s.out_all)
            return
        GATEWAY_EVENTS.labels(event.kind).inc()
        if isinstance(event, OUTCOMES):
            limits.release(event.request_id)
        elif isinstance(event, Progress) and event.workflow_status is not None:
            background(on_step(event))
        hub.dispatch(event)

    bus.listen(s.out_all, on_out)

    async def page(_: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers=PAGE_HEADERS)

    async def favicon(_: Request) -> Response:
        # Browsers ask for /favicon.ico on their own, whatever the page links.
        return FileResponse(
            STATIC / "favicon.ico",
            media_type="image/x-icon",
            headers={"cache-control": "max-age=86400"},
        )

    origins = OriginPolicy.from_settings(settings)
    pages = PageApi(bus, intake, auth)
    preferences = PreferenceStore(bus)
    routes: list[BaseRoute] = [
        Route("/", page),
        Route("/favicon.ico", favicon),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
        Route("/api/config", pages.config),
        Route("/api/sessions", guarded(auth, pages.sessions)),
        Route("/api/sessions/{uuid}/history", guarded(auth, pages.history)),
        Route("/api/outbox", guarded(auth, pages.outbox), methods=["GET"]),
        *Workflows(bus, hub, intake, auth, preferences).routes(),
        *ApprovalsApi(bus, intake, auth).routes(),
        *PreferencesApi(preferences, auth).routes(),
        *meta_routes(bus),
        *OpenAIApi(hub, intake, auth).routes(),
        *AgUiApi(intake, auth, Feed(bus)).routes(),
        *A2AApi(hub, intake, auth, Feed(bus)).routes(),
    ]
    probe = Probe(bus)
    probe.register()
    chat = ChatSocket(bus, hub, intake, auth)
    catch_up = CatchUp(bus, hub, chat)
    return ServiceHost(
        "gateway",
        settings,
        bus,
        routes=routes,
        on_ready=[intake.start, catch_up.start],
        on_stop=[catch_up.stop, deliveries.stop],
        host=settings.gateway_host,
        port=settings.gateway_port,
        middleware=[Middleware(origins.middleware), *cors(settings)],
        probe=probe,
        sockets={"/ws": origins.socket(chat.endpoint)},
    )
