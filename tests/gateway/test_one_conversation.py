"""One session is one conversation: its requests are answered one after another, never
interleaved, across sockets and gateway replicas; a message sent while another runs waits its
turn (`enqueue`), is refused (`reject`) or cancels what runs (`interrupt`)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from nats.aio.client import Client as NATS

from contracts import SessionRecord, Subjects
from services.gateway.core.intake import scoped
from services.runtime.bus.kvstore import key_for
from tests.support.fakes.openai_server import FakeOpenAI, Reply
from tests.support.harness import Client, Conversation, System
from tests.support.scripts import last_user, structured

SEED_KEYS = {"on_chat_model_stream", "on_chat_model_end"}


@pytest.fixture
def held(fake_llm: FakeOpenAI) -> Iterator[threading.Event]:
    """The frontline answers directly; an answer to a message with "slow" in it waits for the
    event, every other one comes at once."""
    hold = threading.Event()

    def frontline(body: dict[str, Any]) -> Reply | str | dict[str, Any]:
        if structured(body):
            return {"route_to_orchestrator": False, "reason": "small talk"}
        said = last_user(body)
        if "slow" in said:
            return Reply(f"Answer to {said}, at last.", wait=hold)
        return Reply(f"Answer to {said}.")

    fake_llm.script("fake-frontline", frontline)
    yield hold
    hold.set()


def asked_model(fake_llm: FakeOpenAI, message: str) -> bool:
    return any(last_user(c) == message for c in fake_llm.chat_calls("fake-frontline"))


async def test_an_old_client_gets_two_overlapping_messages_answered_in_order_and_apart(
    system: System, fake_llm: FakeOpenAI, held: threading.Event
) -> None:
    async with Client(system.ws_url) as client:
        await client.send({"uuid": client.uuid, "message": "the slow one"})
        await client.send({"uuid": client.uuid, "message": "the quick one"})
        queued = await client.until_end()  # a turn of its own, before the first answer
        assert queued.text.startswith("Queued:")
        assert not asked_model(fake_llm, "the quick one")  # it waits for the first
        held.set()
        first = await client.until_end()
        second = await client.until_end()
    assert first.text == "Answer to the slow one, at last."
    assert second.text == "Answer to the quick one."
    for frame in [*queued.frames, *first.frames, *second.frames]:
        assert set(frame) <= SEED_KEYS, frame  # an old client sees only the seed's keys


async def test_a_message_from_another_socket_of_the_session_waits_for_the_running_one(
    system: System, fake_llm: FakeOpenAI, held: threading.Event
) -> None:
    async with (
        Client(system.ws_url, events=True) as one,
        Client(system.ws_url, uuid_=one.uuid, events=True) as two,
    ):
        await one.send({"uuid": one.uuid, "message": "slow first", "request_id": "conv-a-1"})
        await two.send({"uuid": two.uuid, "message": "then this", "request_id": "conv-a-2"})
        frames = await frames_until(two, lambda f: f.get("event") == "queued")
        assert frames[-1] == {
            "event": "queued",
            "request_id": "conv-a-2",
            "behind": "conv-a-1",
            "position": 1,
        }
        assert not asked_model(fake_llm, "then this")
        held.set()
        seen = await frames_until(
            one, lambda f: f.get("request_id") == "conv-a-2" and "on_chat_model_end" in f
        )
    ends = [n for n, f in enumerate(seen) if "on_chat_model_end" in f]
    second_starts = min(
        n
        for n, f in enumerate(seen)
        if f.get("request_id") == "conv-a-2" and f.get("event") != "ack"
    )
    first_end = next(n for n in ends if seen[n]["request_id"] == "conv-a-1")
    assert first_end < second_starts  # never interleaved
    assert seen[ends[-1]]["status"] == "completed"


async def test_reject_refuses_a_message_while_another_runs(
    system: System, fake_llm: FakeOpenAI, held: threading.Event
) -> None:
    async with Client(system.ws_url, events=True) as client:
        await client.send({"uuid": client.uuid, "message": "slow one", "request_id": "rej-1"})
        await client.send(
            {"uuid": client.uuid, "message": "not now", "request_id": "rej-2", "if_busy": "reject"}
        )
        frames = await frames_until(client, lambda f: f.get("status") == "rejected")
        (error,) = [f["error"] for f in frames if "error" in f]
        assert error["code"] == "busy" and "rej-1" in error["message"]
        held.set()
        done = await frames_until(client, lambda f: "on_chat_model_end" in f)
    assert done[-1]["request_id"] == "rej-1" and done[-1]["status"] == "completed"
    assert not asked_model(fake_llm, "not now")


async def test_interrupt_cancels_the_running_and_waiting_ones_and_answers_the_new_one(
    system: System, fake_llm: FakeOpenAI, held: threading.Event
) -> None:
    async with Client(system.ws_url, events=True) as client:
        uuid = client.uuid
        await client.send({"uuid": uuid, "message": "slow one", "request_id": "int-1"})
        await client.send({"uuid": uuid, "message": "waiting one", "request_id": "int-2"})
        await frames_until(client, lambda f: f.get("event") == "queued")
        await client.send(
            {
                "uuid": uuid,
                "message": "do this instead",
                "request_id": "int-3",
                "if_busy": "interrupt",
            }
        )
        frames = await frames_until(
            client, lambda f: f.get("request_id") == "int-3" and "on_chat_model_end" in f
        )
    ends = {f["request_id"]: f["status"] for f in frames if "on_chat_model_end" in f}
    assert ends == {"int-1": "cancelled", "int-2": "cancelled", "int-3": "completed"}
    answer = Conversation([f for f in frames if f.get("request_id") == "int-3"])
    assert answer.text == "Answer to do this instead."
    assert not asked_model(fake_llm, "waiting one")


async def test_two_gateway_replicas_keep_one_sessions_order(
    system: System, fake_llm: FakeOpenAI, held: threading.Event
) -> None:
    other = await asyncio.to_thread(system.replica)
    other_ws = other.replace("http://", "ws://") + "/ws"
    async with (
        Client(system.ws_url, events=True) as here,
        Client(other_ws, uuid_=here.uuid, events=True) as there,
    ):
        await here.send({"uuid": here.uuid, "message": "slow here", "request_id": "rep-1"})
        await frames_until(here, lambda f: f.get("event") == "ack")
        await there.send({"uuid": there.uuid, "message": "and there", "request_id": "rep-2"})
        queued = await frames_until(there, lambda f: f.get("event") == "queued")
        assert queued[-1]["behind"] == "rep-1"
        assert not asked_model(fake_llm, "and there")
        held.set()
        seen = await frames_until(
            there, lambda f: f.get("request_id") == "rep-2" and "on_chat_model_end" in f
        )
    order = [f["request_id"] for f in seen if "on_chat_model_end" in f]
    assert order == ["rep-1", "rep-2"]
    answer = Conversation([f for f in seen if f.get("request_id") == "rep-2"])
    assert answer.text == "Answer to and there."


async def frames_until(
    client: Client, predicate: Any, timeout: float = 60.0
) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = []
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        frame = await client.recv(max(deadline - asyncio.get_running_loop().time(), 0.01))
        frames.append(frame)
        if predicate(frame):
            return frames


async def test_a_result_seen_live_is_noted_in_the_next_messages_claim(
    system: System, nc: NATS
) -> None:
    async with Client(system.ws_url, events=True) as client:
        first = await client.ask("hello", request_id="seen-1")
        await client.ask("hello again", request_id="seen-2")
    assert first.end["status"] == "completed"
    kv = await nc.jetstream().key_value(Subjects(system.namespace).sessions_bucket)
    entry = await kv.get(key_for(scoped("anonymous", client.uuid)))
    assert entry.value is not None
    record = SessionRecord.model_validate_json(entry.value)
    # The first answer reached the socket live; the second message's claim noted it, so a
    # reconnect will not replay it (the second's note waits for the next write or 2 s).
    assert "seen-1" not in record.undelivered
    assert record.active is None and record.queued == []
