"""Structured output on servers that lack features, and a role's fallback endpoint, against
the fake OpenAI server (its `refuse`, `wrap` and scripted failures)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from contracts import FrontlineDecision, OrchestratorDecision
from services.runtime.base.errors import LLMInvalidOutput, LLMUnavailable
from services.runtime.base.settings import LLMConfig, Settings, StructuredMode
from services.runtime.llm import LLMClient, Messages, StreamResult
from services.runtime.llm.modes import MODES
from services.runtime.llm.schema import extract_json
from tests.support.fakes.openai_server import FakeOpenAI, Reply
from tests.support.harness import free_port
from tests.support.scripts import structured

ASK: Messages = [{"role": "system", "content": "Decide."}, {"role": "user", "content": "hi"}]
DECISION: dict[str, Any] = {"route_to_orchestrator": True, "reason": "needs a search"}


@pytest.fixture(autouse=True)
def _forget_modes() -> Iterator[None]:
    MODES.forget()  # every test meets the servers for the first time
    yield
    MODES.forget()


def client(
    fake: FakeOpenAI,
    *,
    structured: StructuredMode | None = None,
    fallback: LLMConfig | None = None,
    model: str = "fake-frontline",
    base_url: str | None = None,
) -> LLMClient:
    return fake.client(model=model, base_url=base_url, structured=structured, fallback=fallback)


def asked_with(body: dict[str, object]) -> str:
    """Which mode a recorded request used."""
    fmt = body.get("response_format")
    if isinstance(fmt, dict):
        return str(fmt["type"])
    return "tools" if body.get("tools") else "prompt"


async def test_a_server_without_json_schema_is_asked_by_tool_call_from_then_on(
    fake_llm: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    fake_llm.script("fake-frontline", lambda b: DECISION)
    fake_llm.refuse = {"json_schema"}
    llm = client(fake_llm)
    with caplog.at_level(logging.WARNING, logger="sidekick.llm"):
        first = await llm.structured(ASK, FrontlineDecision)
        second = await llm.structured(ASK, FrontlineDecision)
    assert first.value == second.value == FrontlineDecision(**DECISION)
    assert first.mode == second.mode == "tools"
    calls = fake_llm.chat_calls("fake-frontline")
    assert [asked_with(c) for c in calls] == ["json_schema", "tools", "tools"]
    assert calls[1]["tool_choice"] == {
        "type": "function",
        "function": {"name": "FrontlineDecision"},
    }
    learned = [r for r in caplog.records if "refused json_schema" in r.getMessage()]
    assert len(learned) == 1, "the mode is learned once and said once"
    assert "using tools" in learned[0].getMessage()


async def test_without_json_schema_and_tools_the_schema_goes_in_the_prompt_as_json_object(
    fake_llm: FakeOpenAI,
) -> None:
    fake_llm.script("fake-frontline", lambda b: DECISION)
    fake_llm.refuse = {"json_schema", "tools"}
    got = await client(fake_llm).structured(ASK, FrontlineDecision)
    assert got.mode == "json_object" and got.value.reason == "needs a search"
    last = fake_llm.chat_calls("fake-frontline")[-1]
    assert asked_with(last) == "json_object"
    system = last["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("Decide.")
    assert '"route_to_orchestrator"' in system["content"], "the schema is in the prompt"
    assert ASK[0]["content"] == "Decide.", "the caller's messages are not changed"


async def test_a_server_with_none_of_them_gets_the_schema_in_a_plain_prompt(
    fake_llm: FakeOpenAI,
) -> None:
    fake_llm.script("fake-frontline", lambda b: DECISION)
    fake_llm.refuse = {"json_schema", "tools", "json_object"}
    got = await client(fake_llm).structured(ASK, FrontlineDecision)
    assert got.mode == "prompt"
    calls = fake_llm.chat_calls("fake-frontline")
    assert [asked_with(c) for c in calls] == ["json_schema", "tools", "json_object", "prompt"]
    assert structured(calls[-1]) == "FrontlineDecision"


@pytest.mark.parametrize("wrap", ["fence", "prose"])
async def test_json_wrapped_in_a_fence_or_prose_is_read(fake_llm: FakeOpenAI, wrap: str) -> None:
    fake_llm.script("fake-frontline", lambda b: DECISION)
    fake_llm.wrap = wrap
    got = await client(fake_llm, structured="prompt").structured(ASK, FrontlineDecision)
    assert got.value == FrontlineDecision(**DECISION)
    assert len(fake_llm.chat_calls("fake-frontline")) == 1, "no repair turn was needed"


def test_json_is_found_however_it_is_wrapped() -> None:
    obj = '{"a": "x } y", "b": {"c": [1, 2]}}'
    assert extract_json(obj) == obj
    assert extract_json(f"```json\n{obj}\n```") == obj
    assert extract_json(f"```\n{obj}```") == obj
    assert extract_json(f"Here you go: {obj} -- hope it helps {{not json}}") == obj
    assert extract_json("I think {so} but " + obj) == obj, "a brace in prose is skipped"
    assert extract_json("no json here") == "no json here"


async def test_a_forced_mode_is_used_from_the_first_call(fake_llm: FakeOpenAI) -> None:
    fake_llm.script("fake-frontline", lambda b: DECISION)
    got = await client(fake_llm, structured="json_object").structured(ASK, FrontlineDecision)
    assert got.mode == "json_object"
    assert [asked_with(c) for c in fake_llm.chat_calls("fake-frontline")] == ["json_object"]


async def test_a_forced_mode_the_server_refuses_is_an_error_not_a_silent_change(
    fake_llm: FakeOpenAI,
) -> None:
    fake_llm.refuse = {"tools"}
    with pytest.raises(LLMUnavailable, match="does not support tools"):
        await client(fake_llm, structured="tools").structured(ASK, FrontlineDecision)
    assert len(fake_llm.chat_calls("fake-frontline")) == 1


async def test_a_400_for_another_reason_does_not_change_the_mode(fake_llm: FakeOpenAI) -> None:
    too_long = Reply(status=400, error="This model's maximum context length is 8192 tokens")
    fake_llm.script("fake-frontline", lambda b: too_long)
    llm = client(fake_llm)
    with pytest.raises(LLMUnavailable, match="maximum context length"):
        await llm.structured(ASK, FrontlineDecision)
    assert llm.mode() == "json_schema"
    assert len(fake_llm.chat_calls("fake-frontline")) == 1


async def test_an_invalid_reply_is_repaired_once_with_the_error_and_the_schema(
    fake_llm: FakeOpenAI,
) -> None:
    replies: Iterator[dict[str, Any]] = iter([{"route_to_orchestrator": "maybe"}, DECISION])
    fake_llm.script("fake-frontline", lambda b: next(replies))
    got = await client(fake_llm, structured="json_object").structured(ASK, FrontlineDecision)
    assert got.value.reason == "needs a search" and got.usage.calls == 2
    repair = fake_llm.chat_calls("fake-frontline")[1]["messages"][-1]["content"]
    assert "route_to_orchestrator" in repair and "JSON Schema of FrontlineDecision" in repair


async def test_invalid_twice_names_the_role_the_model_and_the_mode(fake_llm: FakeOpenAI) -> None:
    fake_llm.refuse = {"json_schema"}
    fake_llm.script("fake-frontline", lambda b: {"worker_type": "nonsense"})
    with pytest.raises(LLMInvalidOutput) as info:
        await client(fake_llm).structured(ASK, OrchestratorDecision)
    message = str(info.value)
    assert "frontline" in message and "fake-frontline" in message
    assert "mode tools" in message and "OrchestratorDecision" in message
    assert info.value.mode == "tools"


async def test_the_fallback_answers_when_the_primary_keeps_failing(fake_llm: FakeOpenAI) -> None:
    fake_llm.script("fake-broken", lambda b: Reply(status=503))
    fake_llm.script("fake-backup", lambda b: DECISION)
    backup = LLMConfig("frontline", fake_llm.base_url, "k", "fake-backup")
    got = await client(fake_llm, model="fake-broken", fallback=backup).structured(
        ASK, FrontlineDecision
    )
    assert got.value == FrontlineDecision(**DECISION)
    assert got.model == "fake-backup" and list(got.usage.models) == ["fake-backup"]
    assert len(fake_llm.chat_calls("fake-broken")) == 1


async def test_the_fallback_streams_when_the_primary_refuses_connections(
    fake_llm: FakeOpenAI,
) -> None:
    fake_llm.script("fake-backup", lambda b: "from the backup")
    backup = LLMConfig("frontline", fake_llm.base_url, "k", "fake-backup")
    dead = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    llm = client(fake_llm, base_url=dead, fallback=backup)
    result = StreamResult()
    deltas = [d async for d in llm.stream([{"role": "user", "content": "x"}], result)]
    assert "".join(deltas) == "from the backup"
    assert list(result.usage.models) == ["fake-backup"]


async def test_a_client_error_is_not_sent_to_the_fallback(fake_llm: FakeOpenAI) -> None:
    fake_llm.script("fake-broken", lambda b: Reply(status=400, error="bad message"))
    fake_llm.script("fake-backup", lambda b: "never")
    backup = LLMConfig("frontline", fake_llm.base_url, "k", "fake-backup")
    with pytest.raises(LLMUnavailable, match="bad message"):
        await client(fake_llm, model="fake-broken", fallback=backup).complete(ASK)
    assert fake_llm.chat_calls("fake-backup") == []


async def test_when_both_fail_the_error_says_so(fake_llm: FakeOpenAI) -> None:
    fake_llm.script("fake-broken", lambda b: Reply(status=500))
    fake_llm.script("fake-backup", lambda b: Reply(status=502))
    backup = LLMConfig("frontline", fake_llm.base_url, "k", "fake-backup")
    with pytest.raises(LLMUnavailable, match="and the fallback"):
        await client(fake_llm, model="fake-broken", fallback=backup).complete(ASK)


def test_a_fallback_on_another_server_never_gets_the_primarys_key(
    bare_llm_env: pytest.MonkeyPatch,
) -> None:
    given = {
        "SIDEKICK_LLM_BASE_URL": "https://openrouter.example/api/v1",
        "SIDEKICK_LLM_API_KEY": "sk-primary",
        "SIDEKICK_WORKER_LLM_FALLBACK_BASE_URL": "http://127.0.0.1:11434/v1",
        "SIDEKICK_WORKER_LLM_FALLBACK_MODEL": "llama3.1",
        "SIDEKICK_EVALUATOR_LLM_FALLBACK_MODEL": "gpt-4o",
        "SIDEKICK_EVALUATOR_LLM_STRUCTURED": "tools",
    }
    for name, value in given.items():
        bare_llm_env.setenv(name, value)
    s = Settings()
    worker = s.llm("worker").fallback
    assert worker is not None and worker.model == "llama3.1" and worker.api_key is None
    evaluator = s.llm("evaluator")
    assert evaluator.structured == "tools"
    assert evaluator.fallback is not None and evaluator.fallback.model == "gpt-4o"
    assert evaluator.fallback.base_url == "https://openrouter.example/api/v1"
    assert evaluator.fallback.api_key == "sk-primary", "the same server keeps its key"
    assert s.llm("frontline").fallback is None
