"""A gateway hears only the events of the sessions it holds: a request answered through one
gateway replica reaches no other replica, so adding gateways does not make each one decode
every event; a socket of the same session on the other replica makes it hear them too."""

from __future__ import annotations

import asyncio
import re
import urllib.request

from tests.support.harness import Client, System

EVENTS = re.compile(r'^sidekick_gateway_events_total\{kind="([^"]+)"\} ([0-9.e+]+)$', re.M)


def heard(base_url: str) -> dict[str, float]:
    """The client-bound events a gateway heard so far, by kind (its own counter)."""
    with urllib.request.urlopen(f"{base_url}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return {kind: float(n) for kind, n in EVENTS.findall(text)}


async def test_a_gateway_hears_only_the_sessions_its_sockets_hold(system: System) -> None:
    other = await asyncio.to_thread(system.replica)
    before_here = await asyncio.to_thread(heard, system.http_url)
    async with Client(system.ws_url, events=True) as client:
        convo = await client.ask("hello")
    assert convo.end["status"] == "completed"
    here = await asyncio.to_thread(heard, system.http_url)
    assert here.get("request.completed", 0) > before_here.get("request.completed", 0)
    assert await asyncio.to_thread(heard, other) == {}  # not its session: nothing at all
    # A socket of that session on the other replica: it hears the session's next request.
    other_ws = other.replace("http://", "ws://") + "/ws"
    async with Client(other_ws, uuid_=client.uuid, events=True) as there:
        again = await there.ask("hello again")
    assert again.end["status"] == "completed"
    assert (await asyncio.to_thread(heard, other)).get("request.completed", 0) >= 1
