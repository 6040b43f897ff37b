"""`sidekick bootstrap`: create (or bring up to date) the bus's streams, KV buckets and durable
consumers for a namespace. It needs the NATS admin user; no service user may do it. `sidekick up`
runs it itself; on Kubernetes a Job does (deploy/k8s/base/bootstrap)."""

from __future__ import annotations

import asyncio
import sys

import nats.errors
from nats.aio.client import Client as NATS

from services.cli.outbox import without_password
from services.runtime.base.settings import Settings
from services.runtime.bus.topology import bootstrap


async def _quiet(_: Exception) -> None:
    """nats-py prints a traceback by default; the command says what went wrong."""


async def run_bootstrap(nats_url: str, settings: Settings) -> None:
    nc = NATS()
    await nc.connect(
        nats_url,
        connect_timeout=5,
        max_reconnect_attempts=1,
        allow_reconnect=False,
        error_cb=_quiet,
        name="sidekick-bootstrap",
    )
    try:
        await bootstrap(nc.jetstream(), settings)
    finally:
        await nc.close()


def main(nats_url: str | None) -> int:
    settings = Settings()
    url = nats_url or settings.nats_url
    try:
        asyncio.run(run_bootstrap(url, settings))
    except (OSError, nats.errors.Error) as exc:
        print(
            f"could not bootstrap the bus at {without_password(url)}: {exc!r} (it needs the "
            "NATS admin user: SIDEKICK_NATS_URL=nats://admin:<password>@host:4222)",
            file=sys.stderr,
        )
        return 1
    print(f"the streams, buckets and consumers of namespace {settings.namespace} are in place")
    return 0
