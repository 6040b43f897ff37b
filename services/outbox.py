"""`sidekick outbox`: print the mail kept in the local outbox (unsent: no SendGrid key).

Reads the running gateway's `GET /api/outbox` by default, or the outbox stream directly with
`--nats-url`."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from nats.aio.client import Client as NATS

from contracts import Subjects
from contracts.email import OutboxEntry
from services.runtime import outbox


def render(entries: list[OutboxEntry]) -> str:
    if not entries:
        return "The outbox is empty."
    blocks = []
    for e in entries:
        body = "\n".join(f"    {line}" for line in e.body.splitlines())
        blocks.append(
            f"NOT SENT  {e.created_at:%Y-%m-%d %H:%M:%S %Z}  request {e.request_id}\n"
            f"  To: {', '.join(e.to)}\n"
            f"  Subject: {e.subject}\n{body}"
        )
    footer = "\nThese were NOT sent: set SENDGRID_API_KEY and SENDGRID_FROM_EMAIL to send mail."
    return "\n\n".join(blocks) + "\n" + footer


def from_gateway(url: str, limit: int) -> list[OutboxEntry]:
    resp = httpx.get(f"{url.rstrip('/')}/api/outbox", params={"limit": limit}, timeout=10)
    resp.raise_for_status()
    data: dict[str, Any] = resp.json()
    return [OutboxEntry.model_validate(e) for e in data.get("entries", [])]


async def from_nats(nats_url: str, namespace: str, limit: int) -> list[OutboxEntry]:
    nc = NATS()
    await nc.connect(nats_url, connect_timeout=5, max_reconnect_attempts=0)
    try:
        return await outbox.read(nc.jetstream(), Subjects(namespace), limit=limit)
    finally:
        await nc.close()


def show(*, url: str, nats_url: str | None, namespace: str, limit: int, as_json: bool) -> int:
    try:
        if nats_url:
            entries = asyncio.run(from_nats(nats_url, namespace, limit))
        else:
            entries = from_gateway(url, limit)
    except (httpx.HTTPError, OSError) as exc:
        where = nats_url or url
        print(f"could not read the outbox from {where}: {exc} (is `sidekick up` running?)")
        return 1
    if as_json:
        print(json.dumps([e.model_dump(mode="json") for e in entries], indent=2))
    else:
        print(render(entries))
    return 0
