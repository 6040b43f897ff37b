"""Speaking the gateway's protocols as their clients do: A2A through the official `a2a-sdk`
(its card resolver and 1.0 JSON-RPC transport), AG-UI as raw SSE (each event validated against
ag-ui-protocol's models), and `sidekick chat` as a process on pipes."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from a2a.client import A2ACardResolver
from a2a.client.transports.jsonrpc import JsonRpcTransport
from a2a.types.a2a_pb2 import AgentCard, Message, Part, Role, SendMessageRequest

from tests.support.agui import EVENT
from tests.support.gateway_client import bearer
from tests.support.harness import System, sidekick
from tests.support.sse import Sse, events


def say(text: str, task_id: str = "", context_id: str = "") -> SendMessageRequest:
    """An A2A message from the user (to a task, when it answers one)."""
    message = Message(
        message_id=uuid.uuid4().hex,
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
        task_id=task_id,
        context_id=context_id,
    )
    return SendMessageRequest(message=message)


async def transport(http: httpx.AsyncClient, base: str) -> tuple[AgentCard, JsonRpcTransport]:
    """The agent card at `base`, and the SDK's 1.0 JSON-RPC transport it names."""
    card = await A2ACardResolver(http, base).get_agent_card()
    (v1,) = [i for i in card.supported_interfaces if i.protocol_version == "1.0"]
    return card, JsonRpcTransport(http, card, v1.url)


class Reader:
    """One response's events, read in parts: each validated against ag-ui-protocol."""

    def __init__(self, response: httpx.Response) -> None:
        assert response.status_code == 200
        self.stream = events(response)
        self.got: list[Sse] = []

    async def upto(self, until: str | None = None) -> list[Sse]:
        """Up to the stream's end, or up to a step named `until`."""
        async for sse in self.stream:
            EVENT.validate_python(sse.json)
            self.got.append(sse)
            if until is not None and sse.json.get("stepName") == until:
                break
        return self.got


async def read(response: httpx.Response, until: str | None = None) -> list[Sse]:
    return await Reader(response).upto(until)


@asynccontextmanager
async def ag_ui_stream(
    base: str, body: dict[str, Any], timeout: float = 90, principal: str | None = None
) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.Response]]:
    """An AG-UI run posted (as `principal`, when the gateway requires tokens), its response
    streaming: (the HTTP client, the response)."""
    headers = bearer(principal) if principal else {}
    async with (
        httpx.AsyncClient(base_url=base, headers=headers, timeout=timeout) as http,
        http.stream("POST", "/ag-ui", json=body) as response,
    ):
        yield http, response


async def ag_ui_run(
    base: str, body: dict[str, Any], timeout: float = 90, principal: str | None = None
) -> list[Sse]:
    """An AG-UI run: its events, each validated."""
    async with ag_ui_stream(base, body, timeout, principal) as (_, response):
        return await read(response)


def chat_env() -> dict[str, str]:
    """This process's environment without Sidekick's settings: `sidekick chat` is given its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SIDEKICK_", "OPENAI_"))}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_chat(system: System, lines: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`sidekick chat` with its input and output on pipes, as in `... | sidekick chat | ...`."""
    return sidekick("chat", "--url", system.ws_url, *args, input=lines, env=chat_env())
