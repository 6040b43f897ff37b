"""Reading a server-sent event stream the way a browser's EventSource does: `id`, `event` and
`data` lines, a blank line ending each event, comments (`:`) skipped."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass(frozen=True)
class Sse:
    id: str | None
    event: str
    data: str

    @property
    def json(self) -> Any:
        return json.loads(self.data)


async def events(response: httpx.Response) -> AsyncIterator[Sse]:
    event_id: str | None = None
    name, data = "message", list[str]()
    async for line in response.aiter_lines():
        if not line:
            if data:
                yield Sse(event_id, name, "\n".join(data))
            event_id, name, data = None, "message", []
            continue
        if line.startswith(":"):
            continue
        key, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if key == "id":
            event_id = value
        elif key == "event":
            name = value
        elif key == "data":
            data.append(value)
