"""Talking to the AG-UI endpoint over plain HTTP in the tests of tests/protocols/: run inputs,
event streams read and validated against ag-ui-protocol's models, and a frontend tool round
trip's messages."""

from __future__ import annotations

import uuid
from itertools import takewhile
from typing import Any

import httpx
from ag_ui.core import Event
from pydantic import TypeAdapter

from tests.support.sse import Sse, events

EVENT = TypeAdapter(Event)

BOOKING = {
    "name": "confirm_booking",
    "description": "Ask the user to confirm a table booking in the app; returns their choice.",
    "parameters": {
        "type": "object",
        "properties": {"people": {"type": "integer"}, "time": {"type": "string"}},
        "required": ["people", "time"],
    },
}


def run_input(text: str, thread: str | None = None, **extra: Any) -> dict[str, Any]:
    """An AG-UI run's input: the user's `text`, in a new thread or `thread`."""
    return {
        "threadId": thread or uuid.uuid4().hex[:12],
        "runId": "run-" + uuid.uuid4().hex[:12],
        "messages": [{"id": "m1", "role": "user", "content": text}],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
        **extra,
    }


def answering(first: dict[str, Any], calls: list[dict[str, Any]], result: str) -> dict[str, Any]:
    """The next run on `first`'s thread, as a client sends it once it ran its tool: the
    conversation so far, the model's calls, and a `tool` message with the result of each."""
    assistant = {
        "id": "m2",
        "role": "assistant",
        "toolCalls": [
            {
                "id": c["toolCallId"],
                "type": "function",
                "function": {"name": c["toolCallName"], "arguments": c.get("args", "{}")},
            }
            for c in calls
        ],
    }
    results = [
        {"id": f"m-result-{n}", "role": "tool", "toolCallId": c["toolCallId"], "content": result}
        for n, c in enumerate(calls)
    ]
    return run_input(
        "",
        thread=first["threadId"],
        messages=[*first["messages"], assistant, *results],
        tools=first["tools"],
    )


def calls_of(got: list[Sse]) -> list[dict[str, Any]]:
    """The tool calls a run's events started, with their arguments."""
    found: dict[str, dict[str, Any]] = {}
    for e in got:
        data = e.json
        if data["type"] == "TOOL_CALL_START":
            found[data["toolCallId"]] = {**data, "args": ""}
        elif data["type"] == "TOOL_CALL_ARGS":
            found[data["toolCallId"]]["args"] += data["delta"]
    return list(found.values())


async def read(response: httpx.Response) -> list[Sse]:
    """A response's events, each validated against ag-ui-protocol."""
    assert response.status_code == 200, response.status_code
    got = []
    async for sse in events(response):
        EVENT.validate_python(sse.json)
        got.append(sse)
    return got


async def run(
    base: str, body: dict[str, Any], headers: dict[str, str] | None = None, timeout: float = 90
) -> list[Sse]:
    async with (
        httpx.AsyncClient(base_url=base, timeout=timeout, headers=headers) as http,
        http.stream("POST", "/ag-ui", json=body) as response,
    ):
        return await read(response)


def unframed(got: list[Sse], run_id: str) -> list[Sse]:
    """A re-attached stream's events after the cut. The stream opens with the framing a fresh
    client needs, sent again without ids: the run's RUN_STARTED (and what was open at the cut);
    every event after that has its id."""
    framing = list(takewhile(lambda e: e.id is None, got))
    assert framing and framing[0].json["type"] == "RUN_STARTED"
    assert framing[0].json["runId"] == run_id
    rest = got[len(framing) :]
    assert all(e.id is not None for e in rest)
    return rest


def text(got: list[Sse]) -> str:
    """The run's streamed text, its deltas joined."""
    return "".join(e.json["delta"] for e in got if e.json["type"] == "TEXT_MESSAGE_CONTENT")
