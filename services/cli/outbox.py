"""`sidekick outbox`: print the mail kept in the local outbox (unsent: no SendGrid key).

Reads the running gateway's `GET /api/outbox` by default, or the outbox stream directly with
`--nats-url`. When the gateway requires tokens, the caller's bearer token (`--token` or
`$SIDEKICK_TOKEN`, as for `sidekick chat`) is sent, and the gateway shows that principal's mail."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import nats.errors
from nats.aio.client import Client as NATS

from contracts import Subjects
from contracts.email import OutboxEntry
from services.cli.inspecting import reason
from services.runtime.base.errors import SidekickError
from services.runtime.bus.natslogin import Login, split_servers
from services.runtime.requests import outbox


class GatewayRefused(SidekickError):
    """The gateway answered with an error status; the message says what to do."""


def from_gateway(url: str, limit: int, token: str | None = None) -> list[OutboxEntry]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    resp = httpx.get(
        f"{url.rstrip('/')}/api/outbox", params={"limit": limit}, headers=headers, timeout=10
    )
    if resp.status_code == 401:
        if token:
            raise GatewayRefused(
                f"the gateway at {url} refused the token (401): check --token or $SIDEKICK_TOKEN"
            )
        raise GatewayRefused(
            f"the gateway at {url} requires a token (401): pass --token TOKEN or set SIDEKICK_TOKEN"
        )
    if resp.is_error:
        raise GatewayRefused(f"the gateway at {url} answered {resp.status_code}: {reason(resp)}")
    data: dict[str, Any] = resp.json()
    return [OutboxEntry.model_validate(e) for e in data.get("entries", [])]


async def _quiet(_: Exception) -> None:
    """nats-py's default error callback prints a traceback; `show` says what went wrong."""


async def from_nats(nats_url: str, namespace: str, limit: int) -> list[OutboxEntry]:
    nc = NATS()
    await nc.connect(
        **Login.from_env(nats_url, os.environ).options(),
        connect_timeout=5,
        max_reconnect_attempts=1,  # 0 would mean "retry forever" to nats-py
        allow_reconnect=False,
        error_cb=_quiet,
    )
    try:
        return await outbox.read(nc.jetstream(), Subjects(namespace), limit=limit)
    finally:
        await nc.close()


def without_password(url: str) -> str:
    """`url` (one server or a list) fit to print: a NATS URL may carry its user's password."""
    shown = []
    for server in split_servers(url):
        parts = urlsplit(server)
        if parts.password is not None:
            where = parts.netloc.rpartition("@")[2]
            server = urlunsplit(parts._replace(netloc=f"{parts.username}:***@{where}"))
        shown.append(server)
    return ",".join(shown)


def show(
    *,
    url: str,
    nats_url: str | None,
    namespace: str,
    limit: int,
    as_json: bool,
    token: str | None = None,
) -> int:
    try:
        if nats_url:
            entries = asyncio.run(from_nats(nats_url, namespace, limit))
        else:
            entries = from_gateway(url, limit, token)
    except GatewayRefused as exc:
        print(f"could not read the outbox: {exc}", file=sys.stderr)
        return 1
    except (httpx.HTTPError, OSError, nats.errors.Error) as exc:
        where = without_password(nats_url) if nats_url else url
        print(
            f"could not read the outbox from {where}: {exc} (is `sidekick up` running?)",
            file=sys.stderr,
        )
        return 1
    if as_json:
        print(json.dumps([e.model_dump(mode="json") for e in entries], indent=2))
    else:
        print(outbox.render(entries))
    return 0
