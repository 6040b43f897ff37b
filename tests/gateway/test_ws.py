"""The WebSocket's newer frames on live services: reconnect replay, clarification for new and
old clients, and cancel."""

from __future__ import annotations

import json

from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.gateway_client import AuthClient, api, wait_status
from tests.support.harness import System
from tests.support.scripts import evaluator_asks, evaluator_held


async def finished_while_away(system: System, principal: str, message: str) -> tuple[str, str]:
    """`message` sent on a socket that closed at once, and completed since: (session, request)."""
    async with AuthClient(system.ws_url, principal, events=True) as client:
        rid = await client.ack(message)
    async with api(system.http_url, principal) as http:
        await wait_status(http, rid, "completed")
    return client.uuid, rid


async def test_a_result_that_finished_while_disconnected_arrives_on_reconnect(
    secure_system: System,
) -> None:
    url = secure_system.ws_url
    uuid, rid = await finished_while_away(
        secure_system, "mallory", "search the thing while I am away"
    )
    async with AuthClient(url, "mallory", uuid_=uuid, events=True) as back:
        convo = await back.until_end_of(rid)
        assert convo.frames[0] == {"event": "replay", "request_id": rid}
        assert convo.answer.startswith("Answer to:")
        assert convo.end["status"] == "completed"
        # Delivered now: a later reconnect gets nothing again; the next frame is our own.
        mine = await back.ack("hello")
        await back.until_end_of(mine)
    async with AuthClient(url, "mallory", uuid_=uuid, events=True) as again:
        other = await again.ack("hello once more")
        assert other != rid


async def test_an_old_client_gets_a_missed_result_as_text_on_reconnect(
    secure_system: System,
) -> None:
    url = secure_system.ws_url
    uuid, _ = await finished_while_away(secure_system, "oscar", "search for my missed answer")
    async with AuthClient(url, "oscar", uuid_=uuid) as old:
        convo = await old.until_end()
    assert convo.answer.startswith("Answer to:")
    assert convo.frames[-1] == {"on_chat_model_end": True}


async def test_a_clarification_is_asked_and_answered_over_the_socket_in_events_mode(
    secure_system: System, fake_llm: FakeOpenAI
) -> None:
    evaluator_asks(fake_llm)
    async with AuthClient(secure_system.ws_url, "peggy", events=True) as client:
        rid = await client.ack("search the weather for my trip")
        frames = await client.frames_until(lambda f: "on_chat_model_end" in f)
        (asked,) = [f for f in frames if f.get("event") == "clarification"]
        assert asked == {
            "event": "clarification",
            "request_id": rid,
            "questions": [{"id": "q1", "question": "Which city?"}],
        }
        assert frames[-1]["status"] == "awaiting_clarification"
        # A plain next message in the session answers the parked request.
        await client.send({"uuid": client.uuid, "message": "Porto"})
        ack = (await client.frames_until(lambda f: f.get("event") == "ack"))[-1]
        assert ack == {"event": "ack", "request_id": rid, "action": "answer"}
        done = await client.until_end_of(rid)
    assert done.end["status"] == "completed"
    assert "Porto" in json.dumps(fake_llm.chat_calls("fake-worker")[-1]["messages"])


async def test_an_old_client_reads_the_questions_as_text_and_answers_with_reply_to(
    secure_system: System, fake_llm: FakeOpenAI
) -> None:
    evaluator_asks(fake_llm)
    async with AuthClient(secure_system.ws_url, "trent") as client:
        asked = await client.ask("search the weather for my holiday")
        assert "Which city?" in asked.text
        assert asked.frames[-1] == {"on_chat_model_end": True}
        async with api(secure_system.http_url, "trent") as http:
            history = await http.get(f"/api/sessions/{client.uuid}/history")
            rid = history.json()["parked"]["request_id"]
            assert (await http.get(f"/api/workflows/{rid}")).json()["status"] == (
                "awaiting_clarification"
            )
            answered = await client.ask("Lisbon", reply_to=rid)
            assert "Answer to:" in answered.text
            assert (await wait_status(http, rid, "completed"))["status"] == "completed"


async def test_a_cancel_frame_ends_the_request_cancelled(
    secure_system: System, fake_llm: FakeOpenAI
) -> None:
    with evaluator_held(fake_llm):
        async with AuthClient(secure_system.ws_url, "victor", events=True) as client:
            rid = await client.ack("search something long")
            await client.frames_until(lambda f: f.get("stage") == "attempt_started")
            await client.send({"cancel": rid})
            ack = (await client.frames_until(lambda f: f.get("event") == "ack"))[-1]
            assert ack == {"event": "ack", "request_id": rid, "action": "cancel"}
            end = (await client.until_end_of(rid)).end
            assert end["status"] == "cancelled"
            assert end["metadata"]["reason"]
            await client.send({"cancel": rid})
            assert (await client.recv())["error"]["code"] == "conflict"
            await client.send({"cancel": "no-such-request"})
            assert (await client.recv())["error"]["code"] == "not_found"
