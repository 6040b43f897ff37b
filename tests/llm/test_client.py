"""The LLM client against the fake OpenAI server: structured output, retries, usage."""

from __future__ import annotations

import time

import pytest

from contracts import FrontlineDecision
from services.runtime.base.errors import (
    LLMInvalidOutput,
    LLMNotConfigured,
    LLMUnavailable,
    no_model_message,
)
from services.runtime.base.settings import LLMConfig, Settings
from services.runtime.llm import LLMClient, StreamResult
from tests.support.fakes.openai_server import FakeOpenAI, Reply


def client(fake: FakeOpenAI, *, retries: int = 2, timeout: float = 10) -> LLMClient:
    return fake.client(timeout=timeout, retries=retries)


async def test_structured_output_uses_json_schema_and_records_usage(fake_llm: FakeOpenAI) -> None:
    fake_llm.script("fake-frontline", lambda b: {"route_to_orchestrator": True, "reason": "x"})
    got = await client(fake_llm).structured([{"role": "user", "content": "hi"}], FrontlineDecision)
    assert got.value == FrontlineDecision(route_to_orchestrator=True, reason="x")
    assert got.usage.input_tokens == 11 and got.usage.output_tokens == 7
    fmt = fake_llm.chat_calls("fake-frontline")[0]["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "FrontlineDecision"
    assert fmt["json_schema"]["strict"] is True


async def test_invalid_output_twice_raises_with_the_reason(fake_llm: FakeOpenAI) -> None:
    fake_llm.script("fake-frontline", lambda b: "not json at all")
    with pytest.raises(LLMInvalidOutput) as info:
        await client(fake_llm).structured([{"role": "user", "content": "hi"}], FrontlineDecision)
    assert "FrontlineDecision" in str(info.value)
    assert len(fake_llm.chat_calls("fake-frontline")) == 2


async def test_429_is_retried_after_the_servers_retry_after(fake_llm: FakeOpenAI) -> None:
    replies = iter([Reply(status=429, headers={"retry-after": "1"}), Reply("fine")])
    fake_llm.script("fake-frontline", lambda b: next(replies))
    started = time.monotonic()
    done = await client(fake_llm).complete([{"role": "user", "content": "hi"}])
    assert done.text == "fine"
    assert time.monotonic() - started >= 0.9, "the client waited as Retry-After asked"
    assert len(fake_llm.chat_calls("fake-frontline")) == 2


async def test_persistent_5xx_ends_in_llm_unavailable_after_bounded_retries(
    fake_llm: FakeOpenAI,
) -> None:
    fake_llm.script("fake-frontline", lambda b: Reply(status=500))
    with pytest.raises(LLMUnavailable):
        await client(fake_llm, retries=2).complete([{"role": "user", "content": "hi"}])
    assert len(fake_llm.chat_calls("fake-frontline")) == 3


async def test_a_slow_model_times_out(fake_llm: FakeOpenAI) -> None:
    fake_llm.script("fake-frontline", lambda b: Reply("late", delay=2))
    with pytest.raises(LLMUnavailable):
        await client(fake_llm, retries=0, timeout=0.5).complete([{"role": "user", "content": "x"}])


async def test_streaming_yields_deltas_and_usage(fake_llm: FakeOpenAI) -> None:
    fake_llm.script("fake-frontline", lambda b: "one two three")
    result = StreamResult()
    deltas = [d async for d in client(fake_llm).stream([{"role": "user", "content": "x"}], result)]
    assert deltas == ["one ", "two ", "three"]
    assert result.text == "one two three" and result.usage.output_tokens == 7


async def test_an_unconfigured_role_says_which_variables_to_set() -> None:
    llm = LLMClient(LLMConfig("worker", None, None, "m"), timeout=1, max_retries=0)
    with pytest.raises(LLMNotConfigured) as info:
        await llm.complete([{"role": "user", "content": "x"}])
    assert info.value.role == "worker"
    assert str(info.value) == no_model_message()


def test_role_settings_fall_back_to_shared_then_openai_variables(
    bare_llm_env: pytest.MonkeyPatch,
) -> None:
    bare_llm_env.setenv("OPENAI_BASE_URL", "http://openai.example/v1")
    bare_llm_env.setenv("OPENAI_API_KEY", "sk-openai")
    bare_llm_env.setenv("SIDEKICK_EVALUATOR_LLM_MODEL", "judge-model")
    bare_llm_env.setenv("SIDEKICK_WORKER_LLM_BASE_URL", "http://vllm.local/v1")
    s = Settings()
    assert s.llm("evaluator") == LLMConfig(
        "evaluator",
        "http://openai.example/v1",
        "sk-openai",
        "judge-model",
        max_tokens_short=s.llm_max_tokens_short,
        max_tokens_answer=s.llm_max_tokens_answer,
    )
    worker = s.llm("worker")
    assert worker.base_url == "http://vllm.local/v1" and worker.api_key == "sk-openai"
