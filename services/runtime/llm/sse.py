"""Server-sent events of a streamed chat completion, read with as little work per event as
possible: split the body into lines, join an event's `data:` lines, parse each with orjson.

An event whose JSON has an `error` (servers report failures mid-stream that way) raises
`StreamError`; `data: [DONE]` ends the stream. Tool calls arrive in fragments across events:
`gather_tool_calls` folds them together.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson

from services.runtime.base.errors import SidekickError


class StreamError(SidekickError):
    """The server reported an error inside the stream, or sent an unreadable event."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        self.status_code = status_code
        super().__init__(message)


async def events(body: AsyncIterator[bytes]) -> AsyncIterator[dict[str, Any]]:
    """Each event's JSON object, in order, until `[DONE]` or the end of the body (its chunks
    as they arrive)."""
    pending = b""
    data: list[bytes] = []
    async for chunk in body:
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line.endswith(b"\r"):
                line = line[:-1]
            if line.startswith(b"data:"):
                data.append(line[6:] if line[5:6] == b" " else line[5:])
            elif not line and data:
                payload = b"\n".join(data)
                data = []
                if payload == b"[DONE]":
                    return
                yield _parse(payload)
    if pending.startswith(b"data:"):
        data.append(pending[6:] if pending[5:6] == b" " else pending[5:])
    if data and (payload := b"\n".join(data)) != b"[DONE]":
        yield _parse(payload)


def _parse(payload: bytes) -> dict[str, Any]:
    try:
        event = orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        raise StreamError(f"unreadable event in the stream: {payload[:200]!r}") from exc
    if not isinstance(event, dict):
        raise StreamError(f"unexpected event in the stream: {payload[:200]!r}")
    error = event.get("error")
    if error:
        message = error.get("message") if isinstance(error, dict) else str(error)
        code = error.get("code") if isinstance(error, dict) else None
        raise StreamError(
            f"the server reported an error mid-stream: {message or error}",
            code if isinstance(code, int) else None,
        )
    return event


def as_text(value: Any) -> str:
    """A tool call's arguments as text (a server may send them as JSON)."""
    if value is None:
        return ""
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def gather_tool_calls(calls: dict[int, list[str]], deltas: list[dict[str, Any]]) -> None:
    """Fold streamed tool-call fragments (by index: id and name first, then the arguments in
    pieces) into `calls[index] = [id, name, arguments]`."""
    for i, delta in enumerate(deltas):
        index = delta.get("index", i)
        parts = calls.setdefault(index if isinstance(index, int) else i, ["", "", ""])
        if delta.get("id"):
            parts[0] = str(delta["id"])
        fn = delta.get("function") or {}
        name = str(fn.get("name") or "")
        if name and name != parts[1]:  # a server may repeat the whole name in each fragment
            parts[1] += name
        if fn.get("arguments"):
            parts[2] += as_text(fn["arguments"])
