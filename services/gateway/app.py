"""Composition root of the gateway service: the core (core/) and one package per surface: the
web page at `/` (page/), the WebSocket `/ws` (ws/), the workflows API (workflows/), the
approvals queue (approvals/), `/v1` (openai/), AG-UI (agui/) and A2A (a2a/), requests'
timelines and replays (requests/); health and metrics. Wiring only."""

from __future__ import annotations

from starlette.middleware import Middleware
from starlette.routing import BaseRoute

from services.gateway.a2a.card import Offer
from services.gateway.a2a.rpc import A2AApi
from services.gateway.agui.endpoint import AgUiApi
from services.gateway.approvals.api import ApprovalsApi
from services.gateway.core.auth import Auth
from services.gateway.core.catchup import CatchUp
from services.gateway.core.copies import SessionCopies
from services.gateway.core.deliveries import Deliveries
from services.gateway.core.errors import AuthConfigError
from services.gateway.core.feed import Feed
from services.gateway.core.http import cors, meta_routes
from services.gateway.core.hub import Hub
from services.gateway.core.intake import Intake
from services.gateway.core.limits import Limits
from services.gateway.core.origins import OriginPolicy
from services.gateway.core.outbound import Outbound
from services.gateway.core.preferences import PreferenceStore
from services.gateway.openai.api import OpenAIApi
from services.gateway.page.api import PageApi
from services.gateway.requests.api import RequestsApi
from services.gateway.workflows.api import Workflows
from services.gateway.workflows.preferences import PreferencesApi
from services.gateway.ws.connection import Connection
from services.gateway.ws.endpoint import ChatSocket
from services.runtime.base.settings import Settings
from services.runtime.bus.core import Bus
from services.runtime.hosting.health import Probe
from services.runtime.hosting.host import ServiceHost, make_broker
from services.runtime.walls.egress import Egress


def build(settings: Settings) -> ServiceHost:
    try:
        auth = Auth.from_settings(settings)
    except AuthConfigError as exc:  # e.g. an unauthenticated bind on a public address
        raise SystemExit(f"gateway: {exc}") from exc
    broker = make_broker(settings, "gateway")
    bus = Bus(broker, settings, "gateway")
    limits = Limits(settings.rate_limit_per_minute, settings.max_concurrent_requests)
    copies = SessionCopies()
    deliveries = Deliveries(bus, copies=copies)
    intake = Intake(bus, limits, deliveries, copies)
    hub: Hub[Connection] = Hub(on_delivered=deliveries.seen, on_left=deliveries.left)
    Outbound(bus, hub, limits, copies).listen()
    origins = OriginPolicy.from_settings(settings)
    pages = PageApi(bus, intake, auth)
    preferences = PreferenceStore(bus)
    egress = Egress.from_setting(settings.egress_allow)
    a2a = A2AApi(intake, auth, Feed(bus), Offer.of(settings), egress)
    routes: list[BaseRoute] = [
        *pages.routes(),
        *Workflows(bus, hub, intake, auth, preferences).routes(),
        *ApprovalsApi(bus, intake, auth).routes(),
        *RequestsApi(bus, intake, auth).routes(),
        *PreferencesApi(preferences, auth).routes(),
        *meta_routes(bus),
        *OpenAIApi(hub, intake, auth).routes(),
        *AgUiApi(intake, auth, Feed(bus)).routes(),
        *a2a.routes(),
    ]
    probe = Probe(bus)
    probe.register()
    chat = ChatSocket(bus, hub, intake, auth)
    catch_up = CatchUp(bus, hub, intake, chat.replays.catch_up)
    return ServiceHost(
        "gateway",
        settings,
        bus,
        routes=routes,
        on_ready=[intake.start, catch_up.start, a2a.pusher.start],
        on_stop=[catch_up.stop, deliveries.stop, a2a.pusher.stop],
        host=settings.gateway_host,
        port=settings.gateway_port,
        middleware=[Middleware(origins.middleware), *cors(settings)],
        probe=probe,
        sockets={"/ws": origins.socket(chat.endpoint)},
    )
