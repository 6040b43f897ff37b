"""Tokens, isolation between principals, and the gateway's limits, against live services."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest
import websockets
from pydantic import SecretStr
from starlette.websockets import WebSocket, WebSocketState

from contracts.frames import StreamFrame
from services.gateway.core.auth import Auth
from services.gateway.core.errors import AuthConfigError
from services.gateway.ws.connection import SEND_QUEUE_FRAMES, Connection
from services.runtime.base.settings import Settings
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.gateway_client import AuthClient, api, wait_status
from tests.support.harness import System
from tests.support.scripts import evaluator_held, verdict


@pytest.fixture
def hold_evaluator(fake_llm: FakeOpenAI) -> Iterator[threading.Event]:
    """Every verdict waits until the test sets the event (so requests stay in flight)."""
    with evaluator_held(fake_llm, verdict(True, 90, "fine")) as hold:
        yield hold


async def test_a_socket_without_a_token_or_with_a_wrong_one_is_refused(
    secure_system: System,
) -> None:
    url = secure_system.ws_url
    with pytest.raises(websockets.InvalidStatus) as refused:
        await websockets.connect(url, additional_headers={"Authorization": "Bearer nope-nope"})
    assert refused.value.response.status_code == 401

    async with websockets.connect(url) as ws:  # no token at all: a seed client reads text
        await ws.send(json.dumps({"init": True, "uuid": "u1"}))
        said = json.loads(await ws.recv())
        assert set(said) == {"on_chat_model_stream"} and "Authenticate" in str(said)
        assert json.loads(await ws.recv()) == {"on_chat_model_end": True}
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await ws.recv()
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401

    async with websockets.connect(url) as ws:  # a wrong token in the auth frame
        await ws.send(json.dumps({"auth": "tok-nobody-0123456789"}))
        assert json.loads(await ws.recv())["error"]["code"] == "unauthorized"
        with pytest.raises(websockets.ConnectionClosed):
            await ws.recv()

    async with AuthClient(url, "alice", how="frame") as client:
        convo = await client.ask("hello")
    assert convo.text and convo.errors == []


async def test_a_socket_that_never_authenticates_is_closed(secure_system: System) -> None:
    async with websockets.connect(secure_system.ws_url) as ws:
        error = json.loads(await asyncio.wait_for(ws.recv(), 30))["error"]
        assert error["code"] == "unauthorized" and "in time" in error["message"]
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), 30)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401


async def test_the_http_api_needs_a_bearer_token(secure_system: System) -> None:
    for path in ("/api/workflows", "/api/outbox", "/api/sessions/some-uuid/history"):
        async with api(secure_system.http_url, None) as anonymous:
            missing = await anonymous.get(path)
            wrong = await anonymous.get(path, headers={"Authorization": "Bearer wrong-token"})
        assert missing.status_code == 401, path
        assert missing.json()["error"]["code"] == "unauthorized"
        assert missing.headers["www-authenticate"] == "Bearer"
        assert wrong.status_code == 401, path
    async with api(secure_system.http_url, "alice") as alice:
        assert (await alice.get("/api/workflows")).status_code == 200
        assert (await alice.get("/api/outbox")).status_code == 200
    async with api(secure_system.http_url, None) as anonymous:
        config = (await anonymous.get("/api/config")).json()
    assert config["auth_required"] is True


async def test_another_principal_gets_404_and_never_sees_the_frames(
    secure_system: System,
) -> None:
    url, shared = secure_system.ws_url, "same-uuid-for-both"
    async with (
        AuthClient(url, "bob", uuid_=shared, events=True) as bob,
        AuthClient(url, "carol", uuid_=shared, events=True) as carol,
    ):
        rid = await bob.ack("hello from bob")
        bobs = await bob.until_end_of(rid)
        assert bobs.text and bobs.end["status"] == "completed"

        # Carol's first frames after her own message are her own: none of Bob's leaked in.
        carol_rid = await carol.ack("hello from carol", request_id="carols-own-id-1")
        assert carol_rid == "carols-own-id-1"
        carols = await carol.until_end_of(carol_rid)
        assert all(f.get("request_id", carol_rid) == carol_rid for f in carols.frames)

        # Carol cannot cancel, answer or reuse Bob's request.
        await carol.send({"cancel": rid})
        err = (await carol.recv())["error"]
        assert err["code"] == "not_found"
        await carol.send({"uuid": shared, "message": "my answer", "reply_to": rid})
        assert (await carol.recv())["error"]["code"] == "not_found"
        assert (await carol.recv())["status"] == "rejected"
        await carol.send({"uuid": shared, "message": "give me that", "request_id": rid})
        assert (await carol.recv())["error"]["code"] == "conflict"
        assert "on_chat_model_end" in await carol.recv()

    async with api(secure_system.http_url, "carol") as http:
        assert (await http.get(f"/api/workflows/{rid}")).status_code == 404
        assert (await http.delete(f"/api/workflows/{rid}")).status_code == 404
        resumed = await http.post(f"/api/workflows/{rid}/feedback", json={"responses": {"q1": "x"}})
        assert resumed.status_code == 404
        assert (await http.get("/api/workflows")).json() == []  # chat requests are not listed
        history = (await http.get(f"/api/sessions/{shared}/history")).json()
        assert [t["content"] for t in history["turns"] if t["role"] == "user"] == [
            "hello from carol"
        ]
    async with api(secure_system.http_url, "bob") as http:
        assert (await http.get(f"/api/workflows/{rid}")).json()["status"] == "completed"
        assert (await http.get("/api/sessions/never-used-uuid/history")).status_code == 404


async def test_the_rate_limit_answers_a_clear_error_frame_and_429(secure_system: System) -> None:
    async with AuthClient(secure_system.ws_url, "dave", events=True) as client:
        for n in range(5):  # SIDEKICK_RATE_LIMIT_PER_MINUTE=5
            rid = await client.ack(f"hello {n}")
            await client.until_end_of(rid)
        await client.send({"uuid": client.uuid, "message": "one too many", "request_id": "dave-6"})
        error = (await client.recv())["error"]
        assert error["code"] == "rate_limited"
        assert "5 requests per minute" in error["message"]
        end = await client.recv()
        assert end["on_chat_model_end"] and end["status"] == "rejected"
    async with api(secure_system.http_url, "dave") as http:
        refused = await http.post("/api/workflows", json={"text": "search more"})
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "rate_limited"
    assert int(refused.headers["retry-after"]) >= 1


async def test_the_concurrency_cap_refuses_a_third_request_in_flight(
    secure_system: System, hold_evaluator: threading.Event
) -> None:
    async with AuthClient(secure_system.ws_url, "erin", events=True) as client:
        first = await client.ack("search one")
        second = await client.ack("search two")
        await client.send({"uuid": client.uuid, "message": "search three"})
        error = (await client.frames_until(lambda f: "error" in f))[-1]["error"]
        assert error["code"] == "rate_limited"
        assert "at most 2 at once" in error["message"]
        async with api(secure_system.http_url, "erin") as http:
            refused = await http.post("/api/workflows", json={"text": "search four"})
            assert refused.status_code == 429
            assert "in flight" in refused.json()["error"]["message"]
            hold_evaluator.set()
            await wait_status(http, first, "completed")
            await wait_status(http, second, "completed")
        # The end of a request frees its place.
        await client.until_end_of(second)
        third = await client.ack("hello again")
        assert (await client.until_end_of(third)).end["status"] == "completed"


async def test_a_message_over_the_length_limit_is_refused(secure_system: System) -> None:
    async with AuthClient(secure_system.ws_url, "frank", events=True) as client:
        await client.send({"uuid": client.uuid, "message": "x" * 501})
        error = (await client.recv())["error"]
        assert error["code"] == "message_too_long" and "500 characters" in error["message"]
    async with api(secure_system.http_url, "frank") as http:
        resp = await http.post("/api/workflows", json={"text": "x" * 501})
    assert resp.status_code == 422


async def test_every_surface_renders_the_one_length_check_in_its_own_shape(
    secure_system: System,
) -> None:
    """One check in the core (Intake.say), each protocol's own refusal: the numbers are the
    limit's, and nothing was started."""
    too_long, said = "x" * 501, "Messages are limited to 500 characters."
    async with api(secure_system.http_url, "frank") as http:
        v1 = await http.post(
            "/v1/chat/completions",
            json={"model": "sidekick", "messages": [{"role": "user", "content": too_long}]},
        )
        agui = await http.post(
            "/ag-ui",
            json={
                "threadId": "long-thread",
                "runId": "long-run",
                "messages": [{"id": "m1", "role": "user", "content": too_long}],
                "state": {},
                "tools": [],
                "context": [],
                "forwardedProps": {},
            },
        )
        message = {"messageId": "long-1", "role": "ROLE_USER", "parts": [{"text": too_long}]}
        a2a = await http.post(
            "/a2a",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {"message": message},
            },
        )
        workflow = await http.post("/api/workflows", json={"text": too_long})
        workflows = await http.get("/api/workflows")
        sessions = await http.get("/api/sessions")
    assert v1.status_code == 400
    assert v1.json()["error"] == {
        "message": said,
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_body",
    }
    assert agui.status_code == 422 and agui.json()["error"]["message"] == said
    assert a2a.status_code == 200 and a2a.json()["error"] == {
        "code": -32602,
        "message": "Invalid params: messages are limited to 500 characters.",
    }
    assert workflow.status_code == 422
    assert workflow.json()["detail"] == [
        {"loc": ["body", "text"], "msg": "too long", "type": "string_too_long"}
    ]
    assert workflow.json()["error"]["message"] == "text is limited to 500 characters."
    assert workflows.json() == [] and sessions.json() == {"sessions": []}, "nothing started"


class StuckSocket:
    """A WebSocket whose peer never reads: every send waits forever."""

    client_state = WebSocketState.CONNECTED

    def __init__(self) -> None:
        self.closed_with: tuple[int, str] | None = None
        self.never = asyncio.Event()

    async def send_text(self, text: str) -> None:
        await self.never.wait()

    async def close(self, code: int = 1000, reason: str | None = None) -> None:
        self.closed_with = (code, reason or "")


async def test_a_slow_reader_is_closed_with_1008_once_its_send_queue_is_full() -> None:
    stuck = StuckSocket()
    conn = Connection(cast(WebSocket, stuck))
    frame = StreamFrame(on_chat_model_stream="x" * 100)
    conn.send(frame)
    await asyncio.sleep(0)  # its writer takes it and blocks on the socket
    for _ in range(SEND_QUEUE_FRAMES):
        conn.send(frame)
    assert not conn.closed
    conn.send(frame)
    assert conn.closed
    for _ in range(100):
        if stuck.closed_with is not None:
            break
        await asyncio.sleep(0.01)
    assert stuck.closed_with == (1008, "send queue full")
    assert len(conn.pending or ()) <= SEND_QUEUE_FRAMES, "memory stays bounded"
    conn.send(frame)  # sending to a closed connection is a no-op, not an error
    await conn.discard()
    assert conn.writing is None


def test_tokens_map_to_principals_and_bad_entries_are_refused() -> None:
    from services.gateway.core.auth import parse_tokens

    assert parse_tokens(["tok:with:colons-123:alice", "# comment", ""], "t") == {
        "tok:with:colons-123": "alice"
    }
    for bad in ("short:alice", "long-enough-token:al/ice", "no-principal-here", "x" * 9 + ":"):
        with pytest.raises(AuthConfigError):
            parse_tokens([bad], "t")


def test_without_tokens_the_gateway_serves_only_loopback_unless_told_otherwise(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="sidekick.gateway"):
        assert not Auth.from_settings(Settings(gateway_host="127.0.0.1")).required
    assert "auth is OFF" in caplog.text
    with pytest.raises(AuthConfigError, match="SIDEKICK_ALLOW_UNAUTHENTICATED"):
        Auth.from_settings(Settings(gateway_host="0.0.0.0"))
    allowed = Auth.from_settings(Settings(gateway_host="0.0.0.0", allow_unauthenticated=True))
    assert allowed.principal(None) == "anonymous"

    tokens = tmp_path / "tokens"
    tokens.write_text("# people\nfile-token-0001:alice\n\nfile-token-0002:bob\n")
    auth = Auth.from_settings(
        Settings(
            gateway_host="0.0.0.0",
            auth_tokens_file=tokens,
            auth_tokens=SecretStr("env-token-0003:carol"),
        )
    )
    assert auth.required
    assert [auth.principal(t) for t in ("file-token-0002", "env-token-0003", "nope", None)] == [
        "bob",
        "carol",
        None,
        None,
    ]
    assert "file-token" not in caplog.text and "env-token" not in caplog.text
