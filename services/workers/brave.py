"""Brave Search over its REST API (httpx), normalised to `contracts.Source`.

Web results come from `/res/v1/web/search` as `{"web": {"results": [...]}}`; news from
`/res/v1/news/search` as `{"results": [...]}`. Each result has `title`, `url`, `description`
(with <strong> highlights) and often `age`.
"""

from __future__ import annotations

import html
import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from contracts import Source
from services.workers.errors import SearchNotConfigured, SearchRejected, SearchUnavailable

WEB_PATH = "/res/v1/web/search"
NEWS_PATH = "/res/v1/news/search"

_NEWS_WORDS = re.compile(
    r"\b(news|latest|today|tonight|yesterday|this (week|month|morning)|breaking|headlines?|"
    r"current(ly)?|right now|recent(ly)?|announce[ds]?|price|prices|stock|score|election)\b",
    re.IGNORECASE,
)
_TAG = re.compile(r"<[^>]+>")


def is_news_query(text: str) -> bool:
    """Deterministic: does the text ask about news or current data?"""
    return bool(_NEWS_WORDS.search(text))


def clean(text: str) -> str:
    """Brave's snippets carry HTML highlights and entities; keep the words."""
    return " ".join(html.unescape(_TAG.sub("", text)).split())


def normalise_url(url: str) -> str:
    """The key two results share when they are the same page."""
    parts = urlsplit(url.strip())
    path = parts.path.rstrip("/") or "/"
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, parts.query, ""))


def dedupe(sources: list[Source]) -> list[Source]:
    seen: set[str] = set()
    out = []
    for source in sources:
        key = normalise_url(source.url)
        if key not in seen:
            seen.add(key)
            out.append(source)
    return out


def _sources(items: Any) -> list[Source]:
    out = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or not item.get("url"):
            continue
        age = item.get("age") or item.get("page_age")
        out.append(
            Source(
                title=clean(str(item.get("title") or item["url"])),
                url=str(item["url"]),
                snippet=clean(str(item.get("description") or "")),
                age=str(age) if age else None,
            )
        )
    return out


class BraveClient:
    """One per process; `http` is shared and closed by its owner."""

    def __init__(
        self, http: httpx.AsyncClient, *, api_key: str | None, base_url: str, count: int
    ) -> None:
        self.http = http
        self.api_key = api_key
        self.base_url = base_url.rstrip("/")
        self.count = count

    @property
    def configured(self) -> bool:
        return bool(self.api_key)

    async def search(self, query: str, *, news: bool = False) -> list[Source]:
        if not self.api_key:
            raise SearchNotConfigured()
        path = NEWS_PATH if news else WEB_PATH
        try:
            resp = await self.http.get(
                self.base_url + path,
                params={"q": query, "count": self.count},
                headers={"Accept": "application/json", "X-Subscription-Token": self.api_key},
            )
        except httpx.TimeoutException as exc:
            raise SearchUnavailable(f"Brave Search timed out for {query!r}.") from exc
        except httpx.HTTPError as exc:
            raise SearchUnavailable(f"Brave Search could not be reached: {exc!r}.") from exc
        if resp.status_code == 429 or resp.status_code >= 500:
            raise SearchUnavailable(
                f"Brave Search is unavailable (HTTP {resp.status_code}); try again later."
            )
        if resp.status_code >= 400:
            raise SearchRejected(resp.status_code, _detail(resp))
        try:
            data = resp.json()
        except ValueError as exc:
            raise SearchUnavailable(
                "Brave Search answered with something that is not JSON."
            ) from exc
        if not isinstance(data, dict):
            raise SearchUnavailable("Brave Search answered with an unexpected shape.")
        items = data.get("results") if news else (data.get("web") or {}).get("results")
        return dedupe(_sources(items))


def _detail(resp: httpx.Response) -> str:
    try:
        data = resp.json()
    except ValueError:
        return resp.text[:200] or resp.reason_phrase
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        return str(error.get("detail") or error.get("code") or error)[:200]
    return str(data)[:200]
