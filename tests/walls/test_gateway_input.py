"""Round two of the gateway's walls, attacked through its public doors: a page on another
origin cannot open /ws or change state, a rebound name cannot read the API, deep JSON is a
clear error (no traceback, the socket stays open), and a huge request head is refused with 431
before the gateway holds it."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import websockets
from websockets.exceptions import InvalidStatus

from tests.support.harness import System
from tests.support.systems import Systems

SEED_ORIGIN = "http://localhost:3000"  # the seeds' web clients' own port


@pytest.fixture(scope="module")
def gateway(systems: Systems) -> Iterator[System]:
    yield from systems.run(SIDEKICK_CORS_ORIGINS=SEED_ORIGIN)


def http(
    system: System, method: str, path: str, body: bytes | None = None, **headers: str
) -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(
        system.http_url + path, data=body, method=method, headers=headers
    )
    if body is not None:
        request.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def gateway_log(system: System) -> str:
    return system.log_path("gateway").read_text(errors="replace")


async def test_a_page_on_another_origin_cannot_open_the_websocket(gateway: System) -> None:
    with pytest.raises(InvalidStatus) as refused:
        async with websockets.connect(gateway.ws_url, origin="http://evil.example"):  # type: ignore[arg-type]
            pass
    assert refused.value.response.status_code == 403
    assert b"forbidden" in refused.value.response.body
    # The gateway's own page, a listed origin, and a program (no Origin) are answered.
    port = gateway.gateway_port
    for origin in (f"http://127.0.0.1:{port}", f"http://localhost:{port}", SEED_ORIGIN, None):
        async with websockets.connect(gateway.ws_url, origin=origin) as ws:  # type: ignore[arg-type]
            await ws.send(json.dumps({"init": True, "uuid": "u1", "events": True}))
            assert json.loads(await asyncio.wait_for(ws.recv(), 30))["event"] == "ready"
    assert "refused a WebSocket /ws: Origin 'http://evil.example'" in gateway_log(gateway)


async def test_a_rebound_name_cannot_read_the_api_and_another_origin_cannot_post(
    gateway: System,
) -> None:
    status, body = http(gateway, "GET", "/api/sessions", Host="evil.example")
    assert status == 403, body
    assert "not a name this gateway serves" in str(body["detail"])
    assert http(gateway, "GET", "/api/sessions", Host="localhost")[0] == 200
    workflow = json.dumps({"text": "plan a trip"}).encode()
    status, body = http(gateway, "POST", "/api/workflows", workflow, Origin="http://evil.example")
    assert status == 403, body
    status, body = http(
        gateway, "POST", "/v1/chat/completions", b"{}", Origin="http://evil.example"
    )
    assert status == 403, body
    # A listed origin gets as far as the body check.
    assert http(gateway, "POST", "/api/workflows", b"[]", Origin=SEED_ORIGIN)[0] == 422


async def test_deeply_nested_json_is_a_clear_error_and_leaves_no_traceback(
    gateway: System,
) -> None:
    deep = "[" * 32_000 + "]" * 32_000
    async with websockets.connect(gateway.ws_url) as ws:
        await ws.send(json.dumps({"init": True, "uuid": "deep", "events": True}))
        assert json.loads(await asyncio.wait_for(ws.recv(), 30))["event"] == "ready"
        for _ in range(20):
            await ws.send(deep)
            frame = json.loads(await asyncio.wait_for(ws.recv(), 30))
            assert frame["error"]["code"] == "invalid_json", frame
            assert "nested deeper than 64 levels" in frame["error"]["message"]
        # The socket is still open and still answers.
        await ws.send(json.dumps({"init": True, "events": True}))
        assert json.loads(await asyncio.wait_for(ws.recv(), 30))["event"] == "ready"
    nested = ("[" * 100_000 + "]" * 100_000).encode()
    # Each API's usual refusal of a bad body: FastAPI's 422, OpenAI's 400, a JSON-RPC error.
    bodies = [("/api/workflows", 422), ("/v1/chat/completions", 400)]
    bodies += [("/a2a", 200), ("/ag-ui", 422)]  # JSON-RPC: errors ride on 200
    for path, usual in bodies:
        status, body = http(gateway, "POST", path, nested)
        assert status == usual, (path, status, body)
        assert "nested deeper than 64 levels" in json.dumps(body)
    log = gateway_log(gateway)
    assert "Traceback" not in log and "RecursionError" not in log


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def test_a_huge_request_head_is_refused_with_431_before_it_is_held(
    gateway: System,
) -> None:
    pid = gateway.procs["gateway"].pid
    before = rss_kib(pid)
    chunk = b"a" * (1 << 20)

    async def attack() -> tuple[int, bytes]:
        """Send one header line of up to 96 MiB; how much went in, and what came back."""
        reader, writer = await asyncio.open_connection("127.0.0.1", gateway.gateway_port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ")
        sent = 0
        try:
            for _ in range(96):
                writer.write(chunk)
                await asyncio.wait_for(writer.drain(), 10)
                sent += len(chunk)
        except (OSError, TimeoutError):
            pass
        try:
            answer = await asyncio.wait_for(reader.read(), 10)
        except OSError:  # closed with our bytes unread: TCP resets, the 431 may be lost
            answer = b""
        writer.close()
        return sent, answer

    results = await asyncio.gather(attack(), attack())
    for sent, answer in results:
        assert answer.startswith(b"HTTP/1.1 431 ") or not answer, answer[:200]
        assert sent < 16 << 20, f"the gateway read {sent >> 20} MiB of one head"
    # A head just over the limit, sent at once, gets the 431 in words.
    reader, writer = await asyncio.open_connection("127.0.0.1", gateway.gateway_port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 40_000)
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    assert b"over 32768 bytes" in answer
    grown = rss_kib(pid) - before
    assert grown < 16 * 1024, f"the gateway grew {grown} KiB"
    status, _ = http(gateway, "GET", "/healthz")
    assert status == 200
