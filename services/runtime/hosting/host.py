"""Hosting one service: the broker with its middlewares, an HTTP surface for health and
metrics, and a clean start/stop. Every service process is one `ServiceHost`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import resource
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

import uvicorn
from faststream.nats import NatsBroker
from faststream.nats.opentelemetry import NatsTelemetryMiddleware
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket

from services.runtime.base.eventloop import run_loop
from services.runtime.base.logs import broker_logger
from services.runtime.base.metrics import READY, REGISTRY
from services.runtime.base.settings import Settings
from services.runtime.base.telemetry import setup_tracing
from services.runtime.bus.busmetrics import prometheus_middleware
from services.runtime.bus.core import Bus
from services.runtime.bus.natsauth import inbox_prefix
from services.runtime.bus.natslogin import Login
from services.runtime.bus.natswatch import Watch, cluster_broker, watch_of
from services.runtime.hosting import endpoints
from services.runtime.hosting.health import Probe, answer_pings
from services.runtime.hosting.natsreach import (
    exit_when_lost,
    hard_exit_later,
    liveness,
    wait_for_nats,
)
from services.runtime.walls.httpguard import Guard, uvicorn_options

log = logging.getLogger("sidekick")


def make_broker(settings: Settings, service: str) -> NatsBroker:
    """The broker every service uses: any server of the list, with the service's own login
    (services/runtime/bus/natslogin.py), reconnecting forever (natswatch.py), traced and
    measured by middleware."""
    tracer_provider = setup_tracing(service)
    login = Login.from_env(settings.nats_url, os.environ, service)
    return cluster_broker(
        login,
        Watch(service, login),
        name=f"sidekick-{service}",
        # Replies come to the service's own inbox prefix, the only one its NATS user may read.
        inbox_prefix=inbox_prefix(service),
        max_reconnect_attempts=-1,
        reconnect_time_wait=1,
        ping_interval=settings.nats_ping_interval,
        max_outstanding_pings=settings.nats_max_outstanding_pings,
        middlewares=[
            NatsTelemetryMiddleware(tracer_provider=tracer_provider),
            prometheus_middleware(REGISTRY, service),
        ],
        logger=broker_logger(service),
        log_level=logging.DEBUG,
    )


@dataclass
class ServiceHost:
    """A service: its bus, extra routes, and hooks run after the bus is ready / before stop."""

    name: str
    settings: Settings
    bus: Bus
    routes: Sequence[BaseRoute] = ()
    on_ready: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    on_stop: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    host: str | None = None
    port: int | None = None
    # The gateway's /readyz asks the whole system (services/runtime/hosting/health.py); None: this
    # process's own readiness.
    probe: Probe | None = None
    started: bool = False
    _server: uvicorn.Server | None = None
    _watchdog: asyncio.Task[None] | None = None
    exit_status: int = 0
    middleware: Sequence[Middleware] = ()
    # WebSocket endpoints by path, served ahead of the routes and their middleware: a socket
    # needs none of it, and each layer is a coroutine frame held for as long as the socket is
    # open (4 of an idle socket's 29 KiB: bench, idle sockets).
    sockets: Mapping[str, Callable[[WebSocket], Awaitable[None]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.name != "gateway":
            answer_pings(self.bus, lambda: self.started and self.bus.connected, self.metrics_url)

    def metrics_url(self) -> str | None:
        """Where this process serves /metrics (its port may have been chosen at start)."""
        servers = getattr(self._server, "servers", None) or []
        for server in servers:
            for sock in server.sockets:
                host, port = sock.getsockname()[:2]
                host = "127.0.0.1" if host == "0.0.0.0" else host
                return f"http://{host if ':' not in host else f'[{host}]'}:{port}/metrics"
        return None

    def asgi(self) -> ASGIApp:
        # Read at scrape time, so the gauge can never disagree with /readyz.
        READY.set_function(lambda: 1.0 if self.started and self.bus.connected else 0.0)

        async def healthz(_: Request) -> Response:
            # Liveness: alive until the bus has been gone longer than the process waits for it
            # (it exits then; the body says how long it has been gone before that).
            alive, nats = liveness(watch_of(self.bus.broker), self.settings.nats_lost_exit_after)
            body = {"status": "ok" if alive else "nats lost", "service": self.name, "nats": nats}
            return JSONResponse(body, status_code=200 if alive else 503)

        async def readyz(request: Request) -> Response:
            # ?scope=self: only this process (Kubernetes' probe of a gateway pod, which should
            # not leave its Service because another service has no replica for a moment).
            if self.probe is not None and request.query_params.get("scope") != "self":
                report = await self.probe.check()
                return JSONResponse(report.model_dump(mode="json"), 200 if report.ready else 503)
            ok = self.started and self.bus.connected
            return JSONResponse(
                {
                    "ready": ok,
                    "service": self.name,
                    "nats": "connected" if self.bus.connected else "down",
                },
                status_code=200 if ok else 503,
            )

        async def metrics(_: Request) -> Response:
            return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)

        @contextlib.asynccontextmanager
        async def lifespan(_: Starlette) -> AsyncIterator[None]:
            await self.bus.setup()
            watch = watch_of(self.bus.broker)
            if watch is not None:
                watch.connected()
            if self.name != "gateway":  # the model roles: what their endpoints are known to take
                await endpoints.share(self.bus.kv.get(endpoints.BUCKET), self.settings, self.name)
            await self.bus.broker.start()
            await self.bus.start()
            for hook in self.on_ready:
                await hook()
            self.started = True
            limit = self.settings.nats_lost_exit_after
            if watch is not None and limit > 0:
                self._watchdog = asyncio.create_task(
                    exit_when_lost(watch, self.name, limit, self._exit)
                )
            log.info("%s ready (pid %d)", self.name, os.getpid())
            try:
                yield
            finally:
                self.started = False
                if self._watchdog is not None:
                    self._watchdog.cancel()
                await self.bus.stop()
                for hook in self.on_stop:
                    with contextlib.suppress(Exception):
                        await hook()
                try:
                    await self.bus.broker.stop()
                except Exception as exc:  # NATS went away first: nothing is left to close
                    log.warning("%s: NATS connection not closed cleanly: %r", self.name, exc)
                await _close_model_clients()

        app = Starlette(
            routes=[
                Route("/healthz", healthz),
                Route("/readyz", readyz),
                Route("/metrics", metrics),
                *self.routes,
            ],
            lifespan=lifespan,
            middleware=list(self.middleware),
        )
        sockets = dict(self.sockets)
        if not sockets:
            return app

        async def serve(scope: Scope, receive: Receive, send: Send) -> None:
            endpoint = sockets.get(scope["path"]) if scope["type"] == "websocket" else None
            if endpoint is None:
                await app(scope, receive, send)
            else:
                await endpoint(WebSocket(scope, receive, send))

        return serve

    def _exit(self, status: int) -> None:
        """End the process with `status` after a clean stop (or, failing that, soon anyway)."""
        self.exit_status = status
        if self._server is not None:
            self._server.should_exit = True
        hard_exit_later(status)

    def run(self) -> int:
        """Serve until stopped; the process's exit status."""
        _raise_open_files_limit()
        settings = self.settings
        guard = Guard(
            max_connections=settings.max_connections,
            max_per_client=settings.max_connections_per_client,
            head_timeout=settings.http_head_timeout,
            max_head_bytes=settings.http_max_head_bytes,
            exempt=frozenset(
                a.strip() for a in settings.connection_limit_exempt.split(",") if a.strip()
            ),
        )
        config = uvicorn.Config(
            self.asgi(),
            host=self.host or self.settings.ops_host,
            port=self.port if self.port is not None else self.settings.ops_port,
            log_level="warning",
            # uvicorn's own logging set-up would print its lines in its own format, past ours.
            log_config=None,
            lifespan="on",
            ws_max_size=self.settings.max_frame_bytes * 4,
            # permessage-deflate keeps a compressor per socket: 72 KiB instead of 32 KiB each
            # (bench: 5,000 idle sockets); chat frames are small, so it buys little.
            ws_per_message_deflate=False,
            timeout_graceful_shutdown=5,
            **uvicorn_options(guard),
        )
        server = self._server = uvicorn.Server(config)

        async def main() -> int:
            login = Login.from_env(self.settings.nats_url, os.environ, self.name)
            status = await wait_for_nats(login, self.name)
            if status is not None:
                return status
            _stop_quietly_on_signals(server)
            await server.serve()
            return self.exit_status

        return run_loop(main())


async def _close_model_clients() -> None:
    """Close the process's HTTP session for model calls, if it ever made one (imported only by
    the services that call models: the gateway does not load the SDK at all)."""
    transport = sys.modules.get("services.runtime.llm.transport")
    if transport is not None:
        await transport.close()


def _stop_quietly_on_signals(server: uvicorn.Server) -> None:
    """SIGINT and SIGTERM stop the server, and then the process ends with status 0. uvicorn
    obeys them while it serves and, when done, raises the signal again for the handler it found:
    Python's default would turn that SIGINT into a KeyboardInterrupt traceback (and SIGTERM into
    death by signal). The handler found is this one; a signal before uvicorn took over also
    stops it."""

    def stop(_signum: int, _frame: object) -> None:
        server.should_exit = True

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop)


def _raise_open_files_limit() -> None:
    """Every socket is a file: allow as many as the hard limit does."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
