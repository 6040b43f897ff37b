"""End to end over the WebSocket, with the five services as separate processes."""

from __future__ import annotations

import json
from typing import Any

from tests.support.fakes.openai_server import FakeOpenAI, Reply, tool_call
from tests.support.harness import Client, Conversation, System
from tests.support.scripts import last_user, verdict


async def ask_and_calls(
    system: System, fake_llm: FakeOpenAI, model: str, message: str
) -> tuple[Conversation, list[dict[str, Any]]]:
    """One request (events mode), and the calls `model` got while it ran."""
    before = len(fake_llm.chat_calls(model))
    convo = await system.ask(message)
    return convo, fake_llm.chat_calls(model)[before:]


async def test_greeting_streams_tokens_then_ends(system: System, fake_llm: FakeOpenAI) -> None:
    fake_llm.script(
        "fake-frontline",
        lambda body: (
            {"route_to_orchestrator": False, "reason": "greeting"}
            if body.get("response_format")
            else Reply("Hi! Lovely to meet you today.", chunk_delay=0.02)
        ),
    )
    async with Client(system.ws_url) as client:
        convo = await client.ask("hello")
    assert convo.answer == "Hi! Lovely to meet you today."
    assert len(convo.chunks) >= 3, "the answer arrives in several stream frames"
    assert convo.frames[-1] == {"on_chat_model_end": True}
    assert convo.errors == []
    # An old client sees only the keys of the seed's protocol.
    assert all(set(f) <= {"on_chat_model_stream", "on_chat_model_end"} for f in convo.frames)


async def test_frontline_sees_the_last_turns_of_the_session(
    system: System, fake_llm: FakeOpenAI
) -> None:
    async with Client(system.ws_url) as client:
        await client.ask("hi, I am Ada")
        await client.ask("how are you")
    calls = fake_llm.chat_calls("fake-frontline")
    contents = [m["content"] for m in calls[-1]["messages"]]
    assert "hi, I am Ada" in contents
    assert contents[-1] == "how are you"


async def test_retry_carries_evaluator_feedback_to_the_worker(
    system: System, fake_llm: FakeOpenAI
) -> None:
    answers = iter(["first draft", "second, better draft"])
    fake_llm.script("fake-worker", lambda body: next(answers))
    verdicts = iter(
        [
            verdict(False, 40, "Too vague: name three examples.", ["List three examples"]),
            verdict(True, 92, "Good."),
        ]
    )
    fake_llm.script("fake-evaluator", lambda body: next(verdicts))
    async with Client(system.ws_url, events=True) as client:
        convo = await client.ask(
            "please research three examples", success_criteria="three examples"
        )
    assert convo.answer == "second, better draft"
    assert convo.end["status"] == "completed"
    assert convo.end["metadata"]["attempts"] == 2
    worker_calls = fake_llm.chat_calls("fake-worker")
    assert len(worker_calls) == 2
    second_input = json.dumps(worker_calls[1]["messages"])
    assert "Too vague: name three examples." in second_input
    assert "List three examples" in second_input
    assert "first draft" in second_input
    evaluated = convo.progress("evaluated")
    assert [e["passed"] for e in evaluated] == [False, True]
    # The user's criteria win over the orchestrator's.
    judged = fake_llm.chat_calls("fake-evaluator")[0]
    assert "three examples" in judged["messages"][-1]["content"]


async def test_always_failing_verdicts_return_the_third_output_with_a_note(
    system: System, fake_llm: FakeOpenAI
) -> None:
    n = {"i": 0}

    def worker(body: dict[str, Any]) -> str:
        n["i"] += 1
        return f"output number {n['i']}"

    fake_llm.script("fake-worker", worker)
    fake_llm.script("fake-evaluator", lambda body: verdict(False, 30, "Still missing the dates."))
    async with Client(system.ws_url, events=True) as client:
        convo = await client.ask("search for the dates")
    assert convo.answer.startswith("output number 3")
    assert "Still missing the dates." in convo.text
    assert "after 3 attempts" in convo.text
    assert convo.end["status"] == "partial"
    assert len(fake_llm.chat_calls("fake-worker")) == 3


async def test_malformed_frames_get_error_frames_and_the_socket_keeps_working(
    system: System,
) -> None:
    async with Client(system.ws_url, events=True) as client:
        await client.send("{not json")
        assert (await client.recv())["error"]["code"] == "invalid_json"
        await client.send(json.dumps([1, 2]))
        assert (await client.recv())["error"]["code"] == "invalid_frame"
        await client.send({"uuid": client.uuid, "message": 42})
        err = (await client.recv())["error"]
        assert err["code"] == "invalid_frame" and "message" in err["message"]
        await client.send({"hello": client.uuid})
        assert (await client.recv())["error"]["code"] == "invalid_frame"
        await client.send({"uuid": client.uuid, "message": "x" * (70 * 1024)})
        assert (await client.recv())["error"]["code"] == "frame_too_large"
        convo = await client.ask("hello again")
        assert convo.text and convo.errors == []


async def test_one_sessions_bad_frames_do_not_disturb_another(system: System) -> None:
    async with Client(system.ws_url) as good, Client(system.ws_url, events=True) as bad:
        await bad.send("garbage")
        convo = await good.ask("hello")
        assert convo.errors == []
        assert (await bad.recv())["error"]["code"] == "invalid_json"


async def test_a_direct_answer_costs_one_model_call(system: System, fake_llm: FakeOpenAI) -> None:
    convo, calls = await ask_and_calls(system, fake_llm, "fake-frontline", "hello")
    assert convo.text == "Hello there! How can I help you today?"
    assert convo.progress("direct")
    (call,) = calls
    assert call["stream"] is True
    assert [t["function"]["name"] for t in call["tools"]] == ["route"]


async def test_a_routed_request_costs_the_frontline_one_model_call(
    system: System, fake_llm: FakeOpenAI
) -> None:
    convo, calls = await ask_and_calls(
        system, fake_llm, "fake-frontline", "please search for tide tables"
    )
    (routed,) = convo.progress("routed")
    assert routed["detail"] == "tools", "the route call's reason"
    assert convo.end["status"] == "completed"
    assert len(calls) == 1


async def test_text_before_a_route_call_still_routes(system: System, fake_llm: FakeOpenAI) -> None:
    fake_llm.script(
        "fake-frontline",
        lambda body: Reply(
            "Let me look that up.", tool_calls=[tool_call("route", {"reason": "needs a search"})]
        ),
    )
    async with Client(system.ws_url, events=True) as client:
        convo = await client.ask("what is on at the cinema")
    assert convo.progress("routed")[0]["detail"] == "needs a search"
    assert convo.end["status"] == "completed"
    assert convo.text.startswith("Let me look that up.")
    assert "Answer to:" in convo.text, "the orchestrated answer follows what was said"


async def test_an_empty_frontline_reply_is_retried_once_then_fails_clearly(
    system: System, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script("fake-frontline", lambda body: "")
    convo, calls = await ask_and_calls(system, fake_llm, "fake-frontline", "hey")
    assert convo.end["status"] == "failed"
    assert convo.errors and convo.errors[0]["code"] == "llm_invalid_output"
    assert len(calls) == 2
    assert "Your reply was empty" in calls[1]["messages"][-1]["content"]


async def test_invalid_model_output_is_retried_once_with_the_error(
    system: System, fake_llm: FakeOpenAI
) -> None:
    replies = iter(
        [
            '{"worker_type": "PERHAPS"}',
            json.dumps(
                {
                    "worker_type": "GENERAL",
                    "task_description": "explain",
                    "parameters": [],
                    "success_criteria": "clear",
                }
            ),
        ]
    )
    fake_llm.script("fake-orchestrator", lambda body: next(replies))
    convo, decisions = await ask_and_calls(
        system, fake_llm, "fake-orchestrator", "please research tides"
    )
    assert convo.end["status"] == "completed"
    assert len(decisions) == 2
    assert "not valid" in decisions[1]["messages"][-1]["content"]


async def test_a_failing_model_gives_a_clear_error_after_bounded_retries(
    system: System, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script("fake-frontline", lambda body: Reply(status=503, error="overloaded"))
    async with Client(system.ws_url, events=True) as client:
        convo = await client.ask("hello")
    assert convo.errors and convo.errors[0]["code"] == "llm_unavailable"
    assert "frontline" in convo.errors[0]["message"]
    assert convo.end["status"] == "failed"
    # SIDEKICK_LLM_MAX_RETRIES=1 in the test env: one call and one retry, no more.
    assert len(fake_llm.chat_calls("fake-frontline")) == 2


async def test_the_orchestrator_refuses_clearly_on_none(
    system: System, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script(
        "fake-orchestrator",
        lambda body: {
            "worker_type": "NONE",
            "task_description": "that would harm someone",
            "parameters": [],
            "success_criteria": "-",
        },
    )
    async with Client(system.ws_url, events=True) as client:
        convo = await client.ask("search how to do something bad")
    assert convo.errors[0]["code"] == "refused"
    assert "that would harm someone" in convo.errors[0]["message"]


async def test_a_retried_request_id_is_answered_once(system: System, fake_llm: FakeOpenAI) -> None:
    async with Client(system.ws_url) as client:
        first = await client.ask("search once", request_id="fixed-id-1")
        again = await client.ask("search once", request_id="fixed-id-1")
    # The first time, the answer followed "Processing your request..." (it was routed).
    assert again.text and first.text.endswith(again.text)
    orchestrations = [
        c for c in fake_llm.chat_calls("fake-orchestrator") if "search once" in last_user(c)
    ]
    assert len(orchestrations) == 1


async def test_request_ids_that_cannot_be_subjects_or_keys_are_refused(system: System) -> None:
    async with Client(system.ws_url, events=True) as client:
        await client.send({"cancel": ":"})
        assert (await client.recv())["error"]["code"] == "invalid_frame"
        await client.send({"uuid": client.uuid, "message": "hi", "request_id": "a.b"})
        assert (await client.recv())["error"]["code"] == "invalid_frame"
        convo = await client.ask("hello after that")
        assert convo.text and convo.errors == []
