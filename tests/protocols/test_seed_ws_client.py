"""What the TypeScript seed's Next.js client relies on (hooks/useWs.ts): it sends
`{uuid, init: true}` then `{uuid, message}`, appends every `on_chat_model_stream` chunk to the
open bot bubble, closes it on `on_chat_model_end`, and shows any other key as a raw JSON
bubble. So an old client must only ever get those two keys: errors as readable text, a routed
request's "Processing your request..." first, as the seed's server sent."""

from __future__ import annotations

import json
from typing import Any

import httpx
import websockets

from tests.support.fakes.openai_server import FakeOpenAI, Reply
from tests.support.harness import Client, System

SEED_KEYS = {"on_chat_model_stream", "on_chat_model_end"}


def seed_only(frames: list[dict[str, Any]]) -> bool:
    return all(set(f) <= SEED_KEYS for f in frames)


async def test_a_routed_request_says_processing_first_then_the_answer(
    system: System, fake_llm: FakeOpenAI
) -> None:
    async with Client(system.ws_url) as client:
        convo = await client.ask("search the tides of Lisbon")
    assert convo.chunks[0] == "Processing your request..."
    assert convo.chunks[1] == "\n\n"
    assert convo.text.startswith("Processing your request...\n\nAnswer to: ")
    assert convo.frames[-1] == {"on_chat_model_end": True} and seed_only(convo.frames)


async def test_a_greeting_is_answered_without_the_processing_text(system: System) -> None:
    async with Client(system.ws_url) as client:
        convo = await client.ask("hello")
    assert convo.text == "Hello there! How can I help you today?" and seed_only(convo.frames)


async def test_an_error_reaches_an_old_client_as_text_and_an_end(
    system: System, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script("fake-frontline", lambda body: Reply(status=503, error="overloaded"))
    async with Client(system.ws_url) as client:
        convo = await client.ask("hello")
        assert convo.text.startswith("Sorry, I could not do that:") and "frontline" in convo.text
        assert seed_only(convo.frames) and convo.frames[-1] == {"on_chat_model_end": True}
        # Frames it cannot be given are refused the same way; the socket stays open.
        for bad in ("{not json", json.dumps({"uuid": client.uuid, "message": 42})):
            await client.send(bad)
            refused = await client.until_end()
            assert refused.text.startswith("Sorry, I could not take that message:")
            assert seed_only(refused.frames)


async def test_any_frame_with_a_uuid_sets_the_session_and_a_message_may_be_a_list(
    system: System,
) -> None:
    async with Client(system.ws_url) as client:
        other = client.uuid + "-b"
        await client.send({"uuid": other})  # no init: the uuid alone sets the session
        await client.send(
            {
                "message": [
                    {"role": "user", "content": "an older question"},
                    {"role": "assistant", "content": "an older answer"},
                    {"role": "user", "content": "hello from a list"},
                ]
            }
        )
        convo = await client.until_end()
    assert convo.text == "Hello there! How can I help you today?" and seed_only(convo.frames)
    async with httpx.AsyncClient(base_url=system.http_url) as http:
        history = (await http.get(f"/api/sessions/{other}/history")).json()
    # The request went to that session, and its text was the list's last user message.
    assert [t["content"] for t in history["turns"]] == [
        "hello from a list",
        "Hello there! How can I help you today?",
    ]


async def test_a_message_before_any_session_is_refused_readably(system: System) -> None:
    async with websockets.connect(system.ws_url) as ws:
        await ws.send(json.dumps({"message": "hi"}))
        said = json.loads(await ws.recv())
        assert set(said) == {"on_chat_model_stream"} and "session" in said["on_chat_model_stream"]
        assert json.loads(await ws.recv()) == {"on_chat_model_end": True}
