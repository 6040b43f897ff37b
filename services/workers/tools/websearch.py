"""web_search: Brave Search's web endpoint (`/res/v1/web/search`, header X-Subscription-Token)
over httpx. The SEARCH worker has a fuller client; this one is the small part a tool needs."""

from __future__ import annotations

from typing import Any

import httpx
from pydantic import Field

from contracts import Source
from services.workers.tools.errors import ToolError, ToolNotConfigured, ToolUnavailable
from services.workers.tools.toolbox import Args, Call, Tool
from services.workers.tools.wikipedia import clean_snippet

WEB_PATH = "/res/v1/web/search"


class SearchArgs(Args):
    query: str = Field(min_length=1, description="The search query.")
    count: int = Field(default=5, ge=1, le=20, description="How many results.")


class WebSearch:
    def __init__(self, http: httpx.AsyncClient, *, api_key: str | None, base_url: str) -> None:
        self.http = http
        self.api_key = api_key or None
        self.base_url = base_url.rstrip("/")

    async def search(self, args: SearchArgs, call: Call) -> str:
        if not self.api_key:
            raise ToolNotConfigured(
                "web_search",
                "set BRAVE_SEARCH_API_KEY to search the web; use wikipedia_search "
                "or browser_navigate instead for now.",
            )
        try:
            resp = await self.http.get(
                self.base_url + WEB_PATH,
                params={"q": args.query, "count": args.count},
                headers={"Accept": "application/json", "X-Subscription-Token": self.api_key},
            )
        except httpx.HTTPError as exc:
            raise ToolUnavailable(f"Brave Search could not be reached: {exc!r}.") from exc
        if resp.status_code in (401, 403, 422):
            raise ToolError(f"Brave Search refused the request (HTTP {resp.status_code}).")
        if resp.status_code >= 400:
            raise ToolUnavailable(f"Brave Search answered HTTP {resp.status_code}.")
        try:
            data = resp.json()
        except ValueError as exc:
            raise ToolUnavailable("Brave Search answered with something that is not JSON.") from exc
        results = ((data or {}).get("web") or {}).get("results") or []
        if not results:
            return f"No web results for {args.query!r}."
        lines = [f"Web results for {args.query!r}:"]
        for item in results[: args.count]:
            if not isinstance(item, dict) or not item.get("url"):
                continue
            source = Source(
                title=clean_snippet(str(item.get("title") or item["url"])),
                url=str(item["url"]),
                snippet=clean_snippet(str(item.get("description") or "")),
                age=str(item["age"]) if item.get("age") else None,
            )
            call.run.add_source(source)
            age = f" ({source.age})" if source.age else ""
            lines.append(f"- {source.title}{age}\n  {source.url}\n  {source.snippet}")
        return "\n".join(lines)

    def tools(self) -> list[Tool[Any]]:
        return [
            Tool(
                "web_search",
                "Search the web (Brave Search); returns titles, links and snippets.",
                SearchArgs,
                self.search,
            )
        ]
