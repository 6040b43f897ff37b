"""web_search: Brave Search's web endpoint, through the SEARCH worker's client."""

from __future__ import annotations

import httpx
from pydantic import Field

from services.workers.brave import BraveClient
from services.workers.errors import SearchError, SearchUnavailable
from services.workers.tools.errors import ToolError, ToolNotConfigured, ToolUnavailable
from services.workers.tools.toolbox import Args, Call, Toolset, tool


class SearchArgs(Args):
    query: str = Field(min_length=1, description="The search query.")
    count: int = Field(default=5, ge=1, le=20, description="How many results.")


class WebSearch(Toolset):
    """The SEARCH worker's Brave client, offered to the model as a tool."""

    def __init__(self, http: httpx.AsyncClient, *, api_key: str | None, base_url: str) -> None:
        self.brave = BraveClient(http, api_key=api_key or None, base_url=base_url, count=20)

    @tool("web_search", "Search the web (Brave Search); returns titles, links and snippets.")
    async def search(self, args: SearchArgs, call: Call) -> str:
        if not self.brave.configured:
            raise ToolNotConfigured(
                "web_search",
                "set BRAVE_SEARCH_API_KEY to search the web; use wikipedia_search "
                "or browser_navigate instead for now.",
            )
        try:
            sources = await self.brave.search(args.query)
        except SearchUnavailable as exc:
            raise ToolUnavailable(str(exc)) from exc
        except SearchError as exc:
            raise ToolError(str(exc)) from exc
        if not sources:
            return f"No web results for {args.query!r}."
        lines = [f"Web results for {args.query!r}:"]
        for source in sources[: args.count]:
            call.run.add_source(source)
            age = f" ({source.age})" if source.age else ""
            lines.append(f"- {source.title}{age}\n  {source.url}\n  {source.snippet}")
        return "\n".join(lines)
