"""`sidekick run <service>`: one service in this process, as a container runs it."""

from __future__ import annotations

import logging
import os
import sys

from services.runtime.natsauth import SERVICES

__all__ = ["SERVICES", "run", "setup_logging"]


def setup_logging(service: str) -> None:
    level = os.environ.get("SIDEKICK_LOG_LEVEL", "INFO").upper()
    logging.basicConfig(
        level=level,
        format=f"%(asctime)s {service:<12} %(levelname)-7s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # Libraries are chatty at INFO; keep our own messages.
    # (The openai SDK's HTTP client logs every request as `httpx2`, one INFO line per call.)
    for noisy in ("httpx", "httpx2", "openai", "faststream", "nats"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def run(service: str, kinds: str | None) -> int:
    from services.runtime.settings import Settings

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
    host.run()
    return 0
