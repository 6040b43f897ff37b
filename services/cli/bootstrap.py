"""`sidekick bootstrap`: create (or bring up to date) the bus's streams, KV buckets and durable
consumers for a namespace. It needs the NATS admin user; no service user may do it. `sidekick up`
runs it itself; on Kubernetes a Job does (deploy/k8s/base/bootstrap)."""

from __future__ import annotations

import asyncio
import os
import sys

import nats.errors
from nats.aio.client import Client as NATS

from services.runtime.base.settings import Settings
from services.runtime.bus.natsauth import ADMIN
from services.runtime.bus.natslogin import Login
from services.runtime.bus.topology import bootstrap


async def _quiet(_: Exception) -> None:
    """nats-py prints a traceback by default; the command says what went wrong."""


async def run_bootstrap(login: Login, settings: Settings) -> None:
    nc = NATS()
    await nc.connect(
        **login.options(),
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
    # The admin's own login (SIDEKICK_ADMIN_NATS_USER, ...) first, then SIDEKICK_NATS_*.
    login = Login.from_env(nats_url or settings.nats_url, os.environ, ADMIN)
    try:
        asyncio.run(run_bootstrap(login, settings))
    except (OSError, nats.errors.Error) as exc:
        print(
            f"could not bootstrap the bus at {login.where} as {login.who}: {exc!r} (it needs "
            "the NATS admin user: SIDEKICK_ADMIN_NATS_USER=admin and "
            "SIDEKICK_ADMIN_NATS_PASSWORD)",
            file=sys.stderr,
        )
        return 1
    print(f"the streams, buckets and consumers of namespace {settings.namespace} are in place")
    return 0
