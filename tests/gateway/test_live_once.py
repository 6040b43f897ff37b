"""A result a socket was given live is not given again, as missed, to the next socket of the same
session: a second tab opened, or the page reloaded, the moment the answer came. The gateway
notes a live delivery in the session's record lazily (services/gateway/core/deliveries.py), so
for a moment the record still lists the result as undelivered; a socket that joined then was
sent it again (issue 35, finding 9)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from services.gateway.core import deliveries
from services.gateway.core.deliveries import Deliveries
from services.runtime.bus.core import Bus
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.gateway_client import api, wait_status
from tests.support.harness import Client, System
from tests.support.scripts import last_user, structured


def small_talk(body: dict[str, Any]) -> Any:
    """Answered directly, each answer its own."""
    if structured(body):
        return {"route_to_orchestrator": False, "reason": "small talk"}
    return f"You said: {last_user(body)}"


async def frames_until_ack(client: Client) -> list[dict[str, Any]]:
    frames = []
    while True:
        frame = await client.recv(60)
        frames.append(frame)
        if frame.get("event") == "ack":
            return frames


async def test_a_socket_opened_the_moment_an_answer_arrives_elsewhere_is_not_sent_it_again(
    system: System, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script("fake-frontline", small_talk)
    async with Client(system.ws_url, events=True) as first:
        await first.send({"uuid": first.uuid, "message": "hello there"})
        ack = await frames_until_ack(first)
        request_id = ack[-1]["request_id"]
        done = await first.until_end()
        assert done.end.get("request_id") == request_id and done.end["status"] == "completed"
        # At once, on the same session: an event client (it would get a replay frame and the
        # whole answer) and an old one (the answer as text and an end).
        async with (
            Client(system.ws_url, uuid_=first.uuid, events=True) as second,
            Client(system.ws_url, uuid_=first.uuid) as old,
        ):
            await second.send({"uuid": second.uuid, "message": "and how are you?"})
            # A socket's replay is sent before it reads its next frame: all of it comes first.
            before = await frames_until_ack(second)
            assert not [f for f in before if f.get("request_id") == request_id], before
            assert not [f for f in before if f.get("event") == "replay"], before
            following = await second.until_end()
            assert following.end.get("request_id") == before[-1]["request_id"]
            assert done.text == "You said: hello there", done.frames
            assert following.text == "You said: and how are you?", following.frames
            # The old client saw the second answer stream live, and nothing of the first.
            seen = await old.until_end()
            assert seen.text == following.text, (seen.frames, following.frames)
    # A socket that was not there when an answer came still gets it (a replay, once).
    async with Client(system.ws_url, events=True) as third:
        await third.send({"uuid": third.uuid, "message": "hello again"})
        third_id = (await frames_until_ack(third))[-1]["request_id"]
    async with api(system.http_url, None) as http:
        await wait_status(http, third_id, "completed")
    async with Client(system.ws_url, uuid_=third.uuid, events=True) as back:
        await back.send({"uuid": back.uuid, "message": "are you there?"})
        replayed = await frames_until_ack(back)
        ends = [f for f in replayed if "on_chat_model_end" in f]
        assert [e.get("request_id") for e in ends] == [third_id], replayed


@pytest.mark.fast
async def test_what_a_gateway_delivered_live_is_remembered_a_while_then_forgotten() -> None:
    now = [1000.0]
    # No note is written in this test (its delay is an hour).
    notes = Deliveries(cast(Bus, None), delay=3600, clock=lambda: now[0])
    notes.seen("alice/s1", "r1")
    now[0] += 1
    notes.seen("alice/s1", "r2")
    notes.seen("alice/s2", "r3")
    assert notes.delivered_here("alice/s1") == {"r1", "r2"}
    assert notes.take("alice/s1") == ["r1", "r2"]  # a write carries the notes
    assert notes.delivered_here("alice/s1") == {"r1", "r2"}, "remembered until written"
    now[0] += deliveries.REMEMBER
    assert notes.delivered_here("alice/s1") == {"r2"}
    now[0] += 1
    assert not notes.delivered_here("alice/s1") and not notes.delivered_here("alice/s2")
    assert not notes._live and not notes._order, "nothing kept past its time"
    for task in list(notes._tasks):
        task.cancel()
