"""wikipedia_search / wikipedia_page over the MediaWiki Action API (`/w/api.php`) with httpx.

Search: `action=query&list=search&srsearch=...` -> `query.search[]` of {title, pageid, snippet
(HTML with <span class="searchmatch">), timestamp}. Page: `action=query&prop=extracts|info
&explaintext=1&inprop=url&redirects=1&titles=...` -> `query.pages[]` of {title, extract,
fullurl} or {title, missing}. Both with `format=json&formatversion=2`.
"""

from __future__ import annotations

import html
import re
from typing import Any
from urllib.parse import quote

import httpx
from pydantic import Field

from contracts import Source
from services.workers.tools.errors import ToolError, ToolUnavailable
from services.workers.tools.toolbox import Args, Call, Toolset, tool

_TAG = re.compile(r"<[^>]+>")


def clean_snippet(snippet: str) -> str:
    return " ".join(html.unescape(_TAG.sub("", snippet)).split())


class SearchArgs(Args):
    query: str = Field(min_length=1, description="What to look for.")
    limit: int = Field(default=5, ge=1, le=20, description="How many results.")


class PageArgs(Args):
    title: str = Field(min_length=1, description="The article's exact title (from a search).")
    max_chars: int = Field(default=6000, ge=200, le=50_000, description="Characters to return.")


class Wikipedia(Toolset):
    def __init__(self, http: httpx.AsyncClient, base_url: str) -> None:
        self.http = http
        self.base_url = base_url.rstrip("/")

    def article_url(self, title: str) -> str:
        return f"{self.base_url}/wiki/{quote(title.replace(' ', '_'))}"

    async def _query(self, params: dict[str, str]) -> dict[str, Any]:
        url = f"{self.base_url}/w/api.php"
        try:
            resp = await self.http.get(
                url, params={"action": "query", "format": "json", "formatversion": "2", **params}
            )
        except httpx.HTTPError as exc:
            raise ToolUnavailable(f"Wikipedia could not be reached: {exc!r}.") from exc
        if resp.status_code >= 400:
            raise ToolUnavailable(f"Wikipedia answered HTTP {resp.status_code}.")
        try:
            data = resp.json()
        except ValueError as exc:
            raise ToolUnavailable("Wikipedia answered with something that is not JSON.") from exc
        if not isinstance(data, dict):
            raise ToolUnavailable("Wikipedia answered with an unexpected shape.")
        if isinstance(data.get("error"), dict):
            err = data["error"]
            raise ToolError(f"Wikipedia refused the query: {err.get('info') or err.get('code')}.")
        return data

    @tool("wikipedia_search", "Search Wikipedia; returns article titles, links and snippets.")
    async def search(self, args: SearchArgs, call: Call) -> str:
        data = await self._query(
            {"list": "search", "srsearch": args.query, "srlimit": str(args.limit)}
        )
        hits = (data.get("query") or {}).get("search") or []
        if not hits:
            return f"No Wikipedia articles match {args.query!r}."
        lines = [f"Wikipedia articles for {args.query!r}:"]
        for hit in hits:
            title = str(hit.get("title", ""))
            snippet = clean_snippet(str(hit.get("snippet", "")))
            lines.append(f"- {title} ({self.article_url(title)}): {snippet}")
        return "\n".join(lines)

    @tool("wikipedia_page", "Read a Wikipedia article's text by its title.")
    async def page(self, args: PageArgs, call: Call) -> str:
        data = await self._query(
            {
                "prop": "extracts|info",
                "explaintext": "1",
                "inprop": "url",
                "redirects": "1",
                "titles": args.title,
            }
        )
        pages = (data.get("query") or {}).get("pages") or []
        if not pages or pages[0].get("missing") or pages[0].get("invalid"):
            raise ToolError(
                f"There is no Wikipedia article titled {args.title!r}; search for it first."
            )
        page = pages[0]
        title = str(page.get("title") or args.title)
        url = str(page.get("fullurl") or self.article_url(title))
        extract = str(page.get("extract") or "")
        call.run.add_source(Source(title=f"{title} - Wikipedia", url=url, snippet=extract[:200]))
        if len(extract) > args.max_chars:
            extract = extract[: args.max_chars] + "\n[... article continues]"
        return f"{title}\n{url}\n\n{extract or '(the article has no text)'}"
