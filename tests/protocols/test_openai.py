"""The OpenAI-compatible endpoint, driven by the real `openai` SDK (and by raw HTTP, as curl
would) against the gateway: models, completions with and without streaming, usage, history,
sessions, clarification as the assistant's question, progress in the added field, errors."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest
from pydantic import BaseModel

from tests.support.fakes.openai_server import FakeOpenAI, Reply
from tests.support.gateway_client import token
from tests.support.harness import System
from tests.support.scripts import evaluator_asks, in_turn, last_user, verdict


def sidekick(obj: BaseModel) -> dict[str, Any]:
    """The added field an OpenAI client ignores: Sidekick's account of the request."""
    extra: dict[str, Any] = (obj.model_extra or {}).get("sidekick") or {}
    return extra


def client(system: System, principal: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=system.http_url + "/v1", api_key=token(principal), max_retries=0, timeout=60
    )


async def test_the_sdk_lists_the_models_and_a_wrong_key_is_refused(secure_system: System) -> None:
    models = await client(secure_system, "gina").models.list()
    assert [m.id for m in models.data] == ["sidekick", "sidekick-direct"]
    assert {m.owned_by for m in models.data} == {"sidekick"}
    wrong = openai.AsyncOpenAI(
        base_url=secure_system.http_url + "/v1", api_key="not-a-token", max_retries=0
    )
    with pytest.raises(openai.AuthenticationError) as refused:
        await wrong.models.list()
    assert refused.value.status_code == 401


async def test_a_completion_answers_with_usage_and_sidekicks_account(
    secure_system: System,
) -> None:
    done = await client(secure_system, "gina").chat.completions.create(
        model="sidekick", messages=[{"role": "user", "content": "hello"}]
    )
    assert done.object == "chat.completion" and done.model == "sidekick"
    assert done.choices[0].message.role == "assistant"
    assert done.choices[0].message.content == "Hello there! How can I help you today?"
    assert done.choices[0].finish_reason == "stop"
    assert done.usage is not None and done.usage.total_tokens > 0
    assert done.usage.total_tokens == done.usage.prompt_tokens + done.usage.completion_tokens
    extra = sidekick(done)
    assert extra["status"] == "completed" and done.id == f"chatcmpl-{extra['request_id']}"
    assert extra["metadata"]["route"] == "direct"


async def test_a_routed_request_streams_its_progress_and_answer_and_usage(
    secure_system: System, fake_llm: FakeOpenAI
) -> None:
    in_turn(
        fake_llm, "fake-evaluator", verdict(False, 40, "Name the city."), verdict(True, 93, "Good.")
    )
    stream = await client(secure_system, "gina").chat.completions.create(
        model="sidekick",
        messages=[{"role": "user", "content": "search the tides of Lisbon"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [c async for c in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.startswith("Answer to:")
    assert chunks[0].choices[0].delta.role == "assistant"
    finish = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert [c.choices[0].finish_reason for c in finish] == ["stop"]
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens > 0
    stages = [
        step["stage"]
        for c in chunks
        if sidekick(c).get("status") == "working"
        for step in sidekick(c)["progress"]
    ]
    assert "routed" in stages and stages.count("evaluated") == 2
    assert sidekick(finish[0])["metadata"]["attempts"] == 2


async def test_sidekick_direct_skips_the_evaluator(
    secure_system: System, fake_llm: FakeOpenAI
) -> None:
    done = await client(secure_system, "hank").chat.completions.create(
        model="sidekick-direct", messages=[{"role": "user", "content": "search the old harbour"}]
    )
    assert (done.choices[0].message.content or "").startswith("Answer to:")
    assert fake_llm.chat_calls("fake-evaluator") == []


async def test_earlier_messages_are_the_requests_history(
    secure_system: System, fake_llm: FakeOpenAI
) -> None:
    await client(secure_system, "hank").chat.completions.create(
        model="sidekick",
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "My name is Ada."},
            {"role": "assistant", "content": "Nice to meet you, Ada."},
            {"role": "user", "content": [{"type": "text", "text": "What is my name?"}]},
        ],
    )
    (decision, *_) = fake_llm.chat_calls("fake-frontline")
    said = [m["content"] for m in decision["messages"]]
    assert "My name is Ada." in said and "Nice to meet you, Ada." in said
    assert last_user(decision) == "What is my name?"


async def test_a_question_is_the_assistants_answer_and_the_next_call_answers_it(
    secure_system: System, fake_llm: FakeOpenAI
) -> None:
    evaluator_asks(fake_llm)
    sdk = client(secure_system, "iris")
    first = await sdk.chat.completions.create(
        model="sidekick",
        messages=[{"role": "user", "content": "search the weather for my trip"}],
        user="iris-trip",
    )
    asked = first.choices[0].message.content or ""
    assert "Which city?" in asked
    assert sidekick(first)["status"] == "awaiting_clarification"
    second = await sdk.chat.completions.create(
        model="sidekick",
        messages=[
            {"role": "user", "content": "search the weather for my trip"},
            {"role": "assistant", "content": asked},
            {"role": "user", "content": "Lisbon"},
        ],
        extra_headers={"X-Sidekick-Session": "ignored-when-user-is-set"},
        user="iris-trip",
    )
    assert sidekick(second)["request_id"] == sidekick(first)["request_id"]
    assert sidekick(second)["status"] == "completed"
    assert "Lisbon" in json.dumps(fake_llm.chat_calls("fake-worker")[-1]["messages"])


async def test_curl_as_openai_documents_it_streams_server_sent_events(
    secure_system: System,
) -> None:
    body = {"model": "sidekick", "messages": [{"role": "user", "content": "hello"}], "stream": True}
    headers = {"Authorization": f"Bearer {token('jack')}", "Content-Type": "application/json"}
    async with (
        httpx.AsyncClient(base_url=secure_system.http_url, timeout=60) as http,
        http.stream("POST", "/v1/chat/completions", json=body, headers=headers) as resp,
    ):
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        lines = [line async for line in resp.aiter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    # As OpenAI sends deltas: only what a chunk adds, never a key set to null.
    assert all(None not in c["choices"][0]["delta"].values() for c in chunks)
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == (
        "Hello there! How can I help you today?"
    )


async def test_errors_come_in_openais_shape(secure_system: System, fake_llm: FakeOpenAI) -> None:
    sdk = client(secure_system, "jack")
    with pytest.raises(openai.NotFoundError) as unknown:
        await sdk.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hello"}]
        )
    assert "sidekick-direct" in unknown.value.message
    with pytest.raises(openai.BadRequestError):
        await sdk.chat.completions.create(
            model="sidekick", messages=[{"role": "system", "content": "x"}]
        )
    fake_llm.script("fake-frontline", lambda body: Reply(status=503, error="overloaded"))
    with pytest.raises(openai.InternalServerError) as failed:
        await sdk.chat.completions.create(
            model="sidekick", messages=[{"role": "user", "content": "hello"}]
        )
    assert "frontline" in failed.value.message
    stream = await sdk.chat.completions.create(
        model="sidekick", messages=[{"role": "user", "content": "hello"}], stream=True
    )
    with pytest.raises(openai.APIError) as mid_stream:
        async for _ in stream:
            pass
    assert "frontline" in mid_stream.value.message
