"""Clients for the gateway tests: a WebSocket client that authenticates, an HTTP client for
the API, tokens per principal, and waiting on a request's status."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import websockets

from tests.support.harness import Client, Conversation

PRINCIPALS = (
    "alice",
    "bob",
    "carol",
    "dave",
    "erin",
    "frank",
    "grace",
    "heidi",
    "ivan",
    "judy",
    "mallory",
    "oscar",
    "peggy",
    "trent",
    "victor",
    "walter",
    "pat",
    "quinn",
    "rupert",
    "sybil",
    "uma",
    "alan",
    "beth",
    "cody",
    "dora",
    "ella",
    "fred",
    "gina",
    "hank",
    "iris",
    "jack",
    # tests/protocols/test_a2a.py and tests/protocols/test_agui.py
    "kim",
    "lou",
    "max",
    "nia",
    # tests/approvals/test_tools.py
    "otto",
    "paula",
    "ruth",
    "sam",
    "tess",
    "vera",
    "wade",
    "yara",
    "zack",
    "xena",
    "zoe",
)


def token(principal: str) -> str:
    return f"tok-{principal}-0123456789"


def tokens_env() -> str:
    return ",".join(f"{token(p)}:{p}" for p in PRINCIPALS)


def bearer(principal: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token(principal)}"}


class AuthClient(Client):
    """Authenticates with a Bearer header (`how="header"`) or a first auth frame ("frame")."""

    def __init__(
        self,
        url: str,
        principal: str,
        uuid_: str | None = None,
        events: bool = False,
        how: str = "header",
    ) -> None:
        super().__init__(url, uuid_, events)
        self.principal = principal
        self.how = how

    async def __aenter__(self) -> AuthClient:
        headers = bearer(self.principal) if self.how == "header" else {}
        self.ws = await websockets.connect(self.url, max_size=None, additional_headers=headers)
        if self.how == "frame":
            await self.send({"auth": token(self.principal)})
            reply = await self.recv()
            assert reply == {"authenticated": True, "principal": self.principal}, reply
        await self.send({"init": True, "uuid": self.uuid, "events": self.events})
        if self.events:
            ready = await self.recv()
            assert ready.get("event") == "ready", ready
        return self

    async def frames_until(self, predicate: Any, timeout: float = 60.0) -> list[dict[str, Any]]:
        """Frames up to and including the first one `predicate` accepts."""
        frames: list[dict[str, Any]] = []
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            left = deadline - asyncio.get_running_loop().time()
            frame = await self.recv(max(left, 0.01))
            frames.append(frame)
            if predicate(frame):
                return frames

    async def ack(self, message: str, **extra: Any) -> str:
        """Send a message (events mode) and return the request id of its ack."""
        await self.send({"uuid": self.uuid, "message": message, **extra})
        frames = await self.frames_until(lambda f: f.get("event") == "ack" or "error" in f)
        assert frames[-1].get("event") == "ack", frames
        return str(frames[-1]["request_id"])

    async def until_end_of(self, request_id: str, timeout: float = 90.0) -> Conversation:
        frames = await self.frames_until(
            lambda f: "on_chat_model_end" in f and f.get("request_id") == request_id, timeout
        )
        return Conversation([f for f in frames if f.get("request_id", request_id) == request_id])


def api(base_url: str, principal: str | None) -> httpx.AsyncClient:
    headers = bearer(principal) if principal else {}
    return httpx.AsyncClient(base_url=base_url, headers=headers, timeout=30)


async def wait_status(
    http: httpx.AsyncClient, request_id: str, *statuses: str, timeout: float = 60.0
) -> dict[str, Any]:
    """Poll GET /api/workflows/{id} until its status is one of `statuses`."""
    deadline = asyncio.get_running_loop().time() + timeout
    body: dict[str, Any] = {}
    while asyncio.get_running_loop().time() < deadline:
        resp = await http.get(f"/api/workflows/{request_id}")
        if resp.status_code == 200:
            body = resp.json()
            if body["status"] in statuses:
                return body
        await asyncio.sleep(0.1)
    raise AssertionError(f"{request_id} never reached {statuses}: {json.dumps(body)[:500]}")
