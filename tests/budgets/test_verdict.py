"""The evaluator is told what the request may still spend (`EvaluationRequested.budget`) and
hands it to the LLM client as its guard, so an invalid verdict's repair call is checked like any
other model call. With three model calls to the request (the decision, the worker's answer, the
verdict) the verdict comes back invalid once: its repair is never sent, and the request ends
partial with the worker's answer, a note naming the limit, and the one evaluator call counted.
With room, an invalid verdict is repaired and the request completes, even one whose repair's
prompt (the long invalid reply, sent back) is longer than one call's hold: the evaluation's step
holds two calls' maximum, its call and one repair. Every fake model call
reports 11 tokens in and 7 out."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.fakes.openai_server import FakeOpenAI, Script
from tests.support.harness import System
from tests.support.scripts import invalid_once, verdict
from tests.support.systems import Systems


@pytest.fixture(scope="module")
def three_calls(systems: Systems) -> Iterator[System]:
    yield from systems.run(workers="GENERAL", SIDEKICK_BUDGET_REQUEST_CALLS="3")


def invalid_verdict(bad: str = "this is not a verdict") -> Script:
    """The evaluator's replies: `bad` (no verdict) at first, a passing verdict after."""
    return invalid_once("Verdict", bad, verdict(True, 90, "Looks good."))


async def test_an_invalid_verdict_is_not_repaired_when_the_budget_allows_no_more_calls(
    three_calls: System, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script("fake-evaluator", invalid_verdict())
    convo = await three_calls.ask("search for the opening hours of the tide museum")
    assert len(fake_llm.chat_calls("fake-worker")) == 1
    assert len(fake_llm.chat_calls("fake-evaluator")) == 1  # the verdict; its repair was not made
    assert convo.end["status"] == "partial", convo.frames
    assert convo.errors == [], convo.frames
    assert convo.answer.startswith("Answer to: "), convo.answer  # the worker's answer
    note = "Note: this request stopped at its model calls budget (1 of the 1 left to this request)."
    assert convo.text.endswith(note), convo.text
    # The evaluator's one call is counted in the request's usage: with the frontline's routing
    # call, four calls in all (the request's budget of 3 counts from the decision on).
    usage = convo.end["metadata"]["usage"]
    assert usage["calls"] == 4 and usage["input_tokens"] == 44, usage
    assert "fake-evaluator" in usage["models"], usage


async def test_an_invalid_verdict_is_repaired_where_the_budget_has_room(
    system: System, fake_llm: FakeOpenAI
) -> None:
    # About 3,000 tokens sent back in the repair: more than one call's hold has room for, so
    # this passes only because the evaluation's step holds two calls' maximum.
    fake_llm.script("fake-evaluator", invalid_verdict("not a verdict " * 1000))
    convo = await system.ask("search for the closing hours of the tide museum")
    calls = fake_llm.chat_calls("fake-evaluator")
    assert len(calls) == 2, convo.frames  # the verdict and its repair
    first, repair = calls
    assert len(repair["messages"]) == len(first["messages"]) + 2  # the bad reply, what was wrong
    assert convo.end["status"] == "completed", convo.frames
    assert convo.answer.startswith("Answer to: "), convo.answer
    assert "Note: this request stopped" not in convo.text
