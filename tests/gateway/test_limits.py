"""The gateway under slow and many clients (all on loopback, bounded in count and time): a
slowloris crowd does not stop /healthz or a chat turn and is closed at the head timeout; a
connection that sends nothing is closed; the per-address cap refuses the excess and says so in
one summary line; a WebSocket that never sends a frame is closed."""

from __future__ import annotations

import asyncio
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import websockets

from tests.support.harness import Client, System
from tests.support.systems import Systems

CROWD = 3000
HEAD_TIMEOUT = 6.0


def system_with(**env: str) -> Callable[..., Iterator[System]]:
    """A module-scoped fixture: a system whose gateway has these settings; the fixture's name
    is the name it is bound to."""

    def system(systems: Systems) -> Iterator[System]:
        yield from systems.run(variables=env)

    return pytest.fixture(system, scope="module")


guarded = system_with(
    SIDEKICK_HTTP_HEAD_TIMEOUT=str(HEAD_TIMEOUT), SIDEKICK_WS_FIRST_FRAME_TIMEOUT="2"
)
capped = system_with(
    SIDEKICK_MAX_CONNECTIONS_PER_CLIENT="40",
    SIDEKICK_CONNECTION_LIMIT_EXEMPT="",  # loopback counts like any other address here
)


def healthz_seconds(system: System) -> float:
    started = time.monotonic()
    with urllib.request.urlopen(system.http_url + "/healthz", timeout=30) as resp:
        assert resp.status == 200
    return time.monotonic() - started


async def closed_by_server(reader: asyncio.StreamReader) -> bool:
    try:
        return await asyncio.wait_for(reader.read(1024), 0.05) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


async def test_a_slowloris_crowd_does_not_stop_the_gateway_and_is_closed_at_the_head_timeout(
    guarded: System,
) -> None:
    log = Path(guarded.log_dir / f"{guarded.namespace}-gateway.log")
    log_before = log.stat().st_size
    port = guarded.gateway_port
    crowd: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    for _ in range(CROWD):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # a head that never ends
        crowd.append((reader, writer))
    opened = time.monotonic()

    async def trickle() -> None:
        for i in range(int(HEAD_TIMEOUT) + 4):
            for _, writer in crowd:
                if not writer.is_closing():
                    writer.write(f"X-Slow-{i}: 1\r\n".encode())
            await asyncio.sleep(1.0)

    trickling = asyncio.create_task(trickle())
    loop = asyncio.get_running_loop()
    health = [await loop.run_in_executor(None, healthz_seconds, guarded) for _ in range(3)]
    turn_started = time.monotonic()
    async with Client(guarded.ws_url) as client:
        convo = await client.ask("hello")
    turn = time.monotonic() - turn_started
    assert convo.text, "a fresh client gets its answer while the crowd is held"
    await trickling
    closed = [await closed_by_server(reader) for reader, _ in crowd]
    took = time.monotonic() - opened
    for _, writer in crowd:
        writer.close()
    print(
        f"\n{CROWD} slowloris connections: /healthz {max(health):.3f} s at worst, chat turn "
        f"{turn:.3f} s, {sum(closed)} closed by the gateway within {took:.1f} s, gateway log "
        f"+{log.stat().st_size - log_before} bytes"
    )
    # Generous bounds (the figures above are the measurement): it answers, it is not stuck.
    assert max(health) < 10 and turn < 30
    assert sum(closed) == CROWD, "every never-ending head is closed by the server"
    assert log.stat().st_size - log_before < 1_000_000


async def test_a_connection_that_sends_nothing_is_closed_at_the_head_timeout(
    guarded: System,
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", guarded.gateway_port)
    started = time.monotonic()
    data = await asyncio.wait_for(reader.read(1024), HEAD_TIMEOUT + 10)
    assert data == b"" and time.monotonic() - started >= HEAD_TIMEOUT - 1
    writer.close()


async def test_a_websocket_that_never_sends_a_frame_is_closed(guarded: System) -> None:
    async with websockets.connect(guarded.ws_url) as ws:
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), 15)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4408


async def test_the_per_address_cap_refuses_the_excess_and_logs_one_summary(
    capped: System,
) -> None:
    held = []
    for _ in range(60):
        reader, writer = await asyncio.open_connection("127.0.0.1", capped.gateway_port)
        held.append((reader, writer))
    await asyncio.sleep(0.5)
    refused = [await closed_by_server(reader) for reader, _ in held]
    assert sum(refused) == 20, "40 are held, the rest refused"
    with pytest.raises(OSError):  # one more from the same address is refused too
        await asyncio.get_running_loop().run_in_executor(None, healthz_seconds, capped)
    for _, writer in held:
        writer.close()
    await asyncio.sleep(0.5)
    loop = asyncio.get_running_loop()
    assert await loop.run_in_executor(None, healthz_seconds, capped) < 10  # free again
    log = Path(capped.log_dir / f"{capped.namespace}-gateway.log")
    deadline = time.monotonic() + 20
    while "refused or closed" not in log.read_text():
        assert time.monotonic() < deadline, "a summary line is written"
        await asyncio.sleep(0.5)
    lines = [ln for ln in log.read_text().splitlines() if "refused or closed" in ln]
    assert len(lines) == 1 and "too many connections from one address" in lines[0]
