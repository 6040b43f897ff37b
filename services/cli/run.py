"""`sidekick run <service>`: one service in this process, as a container runs it."""

from __future__ import annotations

from services.runtime.base.logs import setup_logging
from services.runtime.bus.natsauth import SERVICES

__all__ = ["SERVICES", "run", "setup_logging"]


def run(service: str, kinds: str | None) -> int:
    from services.runtime.base.settings import Settings

    setup_logging(service)
    settings = Settings()
    if service == "gateway":
        from services.gateway.app import build as build_gateway

        host = build_gateway(settings)
    elif service == "frontline":
        from services.frontline.app import build as build_frontline

        host = build_frontline(settings)
    elif service == "orchestrator":
        from services.orchestrator.app import build as build_orchestrator

        host = build_orchestrator(settings)
    elif service == "evaluator":
        from services.evaluator.app import build as build_evaluator

        host = build_evaluator(settings)
    else:
        from services.workers.app import build as build_workers

        host = build_workers(settings, kinds.split(",") if kinds else None)
    return host.run()
