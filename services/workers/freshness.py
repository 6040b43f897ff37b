"""The freshness validator: deterministic, no model. An answer that must be current needs at
least 2 live sources on 2 distinct registrable domains (eTLD+1: `news.example.com` and
`www.example.com` are one); a source is live when it answers HTTP HEAD (or GET, where HEAD is
refused) with a non-error status within the timeout. The probes go through the egress check
(services/runtime/walls/egress.py): a source whose address is not public is not probed and not live,
whatever the search result claims."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from contracts import Source
from services.runtime.walls.egress import EgressRefused, registrable_domain

NOTE = (
    "Note: I could not reliably retrieve enough live sources to guarantee this is fully up to date."
)
MIN_LIVE = 2
MAX_CHECKED = 10
# Statuses meaning "this server does not do HEAD here", not "the page is gone".
HEAD_REFUSED = frozenset({403, 405, 501})


@dataclass(frozen=True)
class Freshness:
    live: list[Source]
    dead: list[Source]

    @property
    def domains(self) -> set[str]:
        return {domain(s.url) for s in self.live}

    @property
    def ok(self) -> bool:
        return len(self.live) >= MIN_LIVE and len(self.domains) >= MIN_LIVE


def domain(url: str) -> str:
    return registrable_domain(url)


async def is_live(http: httpx.AsyncClient, url: str, within: float) -> bool:
    if urlsplit(url).scheme not in ("http", "https"):
        return False
    try:
        async with asyncio.timeout(within):
            resp = await http.head(url, follow_redirects=True, timeout=within)
            if resp.status_code in HEAD_REFUSED:
                async with http.stream("GET", url, follow_redirects=True, timeout=within) as got:
                    return got.status_code < 400
            return resp.status_code < 400
    except (httpx.HTTPError, httpx.InvalidURL, TimeoutError, ValueError, OSError, EgressRefused):
        return False


async def check(http: httpx.AsyncClient, sources: list[Source], within: float) -> Freshness:
    """Probe the sources concurrently (at most MAX_CHECKED of them)."""
    checked = sources[:MAX_CHECKED]
    alive = await asyncio.gather(*(is_live(http, s.url, within) for s in checked))
    return Freshness(
        live=[s for s, ok in zip(checked, alive, strict=True) if ok],
        dead=[s for s, ok in zip(checked, alive, strict=True) if not ok],
    )


def with_note(answer: str) -> str:
    """The answer ending with exactly the freshness note."""
    return f"{answer.rstrip()}\n\n{NOTE}"
