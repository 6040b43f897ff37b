"""The LLM client's budget guard against the fake OpenAI server: consulted before every HTTP
model call, not only the first. A structured reply that is invalid once would be repaired by a
second call; a guard that allows exactly one call refuses the repair (BudgetSpent, naming the
limit and carrying the first call's usage), and the fake server saw one call. A fallback's call
is checked too. The guard is given each call's maximum: its prompt, estimated, and max_tokens."""

from __future__ import annotations

from typing import Any

import pytest

from contracts import FrontlineDecision, Usage
from services.runtime.base.errors import MODEL_ERRORS, BudgetSpent
from services.runtime.base.settings import LLMConfig
from services.runtime.llm import LLMClient, Messages
from services.runtime.llm.calls import call_maximum
from tests.support.fakes.openai_server import FakeOpenAI, Reply

ASK: Messages = [{"role": "user", "content": "hi"}]
DECISION = {"route_to_orchestrator": True, "reason": "x"}


def client(fake: FakeOpenAI, *, fallback: bool = False) -> LLMClient:
    spare = LLMConfig(role="frontline", base_url=fake.base_url, api_key="k", model="fake-spare")
    return fake.client(max_tokens_short=64, fallback=spare if fallback else None)


class Calls:
    """A guard that allows `allowed` HTTP calls and records what it was asked."""

    def __init__(self, allowed: int) -> None:
        self.allowed = allowed
        self.asked: list[tuple[Usage, int]] = []

    def __call__(self, used: Usage, ahead: int) -> str | None:
        self.asked.append((used, ahead))
        if len(self.asked) > self.allowed:
            return f"model calls budget ({self.allowed} of the {self.allowed} left)"
        return None


def invalid_once() -> Any:
    replies = iter(["not json at all", DECISION])
    return lambda body: next(replies)


async def test_a_repair_call_the_guard_refuses_is_not_made(fake_llm: FakeOpenAI) -> None:
    fake_llm.script("fake-frontline", invalid_once())
    guard = Calls(allowed=1)
    with pytest.raises(BudgetSpent) as info:
        await client(fake_llm).structured(ASK, FrontlineDecision, budget=guard)
    assert len(fake_llm.chat_calls("fake-frontline")) == 1  # the repair never reached it
    assert info.value.note == "model calls budget (1 of the 1 left)"
    assert str(info.value) == (
        "The frontline model's next call was not made: model calls budget (1 of the 1 left)"
    )
    # The first call happened: its usage is carried, to be counted.
    assert (info.value.usage.input_tokens, info.value.usage.output_tokens) == (11, 7)
    assert info.value.usage.calls == 1
    # Before the repair the guard saw that usage, and the repair's own maximum.
    assert guard.asked[1][0] == info.value.usage and guard.asked[1][1] > guard.asked[0][1]
    assert isinstance(info.value, MODEL_ERRORS)  # callers that know no better still catch it


async def test_a_guard_that_allows_two_calls_lets_the_repair_through(fake_llm: FakeOpenAI) -> None:
    fake_llm.script("fake-frontline", invalid_once())
    guard = Calls(allowed=2)
    got = await client(fake_llm).structured(ASK, FrontlineDecision, budget=guard)
    assert got.value == FrontlineDecision(**DECISION) and got.usage.calls == 2
    first, repair = fake_llm.chat_calls("fake-frontline")
    # Each call's maximum, as given to the guard: its prompt, estimated, and its max_tokens.
    assert repair["max_tokens"] == 64
    assert [ahead for _, ahead in guard.asked] == [
        call_maximum(first["messages"], first),
        call_maximum(repair["messages"], repair),
    ]


async def test_the_first_call_is_refused_when_its_maximum_could_pass_the_budget(
    fake_llm: FakeOpenAI,
) -> None:
    def tokens(used: Usage, ahead: int) -> str | None:
        return f"tokens budget (next {ahead})" if ahead > 50 else None

    with pytest.raises(BudgetSpent) as info:
        await client(fake_llm).structured(ASK, FrontlineDecision, budget=tokens)
    assert info.value.usage == Usage() and not fake_llm.chat_calls("fake-frontline")
    ahead = int(info.value.note.removeprefix("tokens budget (next ").removesuffix(")"))
    assert ahead > 64  # max_tokens in full, and the prompt on top


async def test_a_fallbacks_call_is_checked_too(fake_llm: FakeOpenAI) -> None:
    fake_llm.script("fake-frontline", lambda body: Reply(status=500))
    fake_llm.script("fake-spare", lambda body: "the spare's answer")
    guard = Calls(allowed=1)
    with pytest.raises(BudgetSpent):
        await client(fake_llm, fallback=True).complete(ASK, budget=guard)
    assert len(fake_llm.chat_calls("fake-frontline")) == 1
    assert fake_llm.chat_calls("fake-spare") == []  # refused before it was sent
    done = await client(fake_llm, fallback=True).complete(ASK, budget=Calls(allowed=2))
    assert done.text == "the spare's answer"
