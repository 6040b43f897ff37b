"""Budgets inside the research worker: the LLM client checks the task's budget before each of
its HTTP model calls (planner, synthesizer, and a repair of either), each call's maximum counted
in advance, so a request whose budget runs out mid-research ends partial with the sources found
and a note naming the limit, and the call that would pass it is never made. Every fake model
call reports 11 tokens in and 7 out."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace

import pytest

from contracts.base import TaskBudget
from services.runtime.llm.calls import call_maximum
from services.workers.research import ResearchWorker
from services.workers.settings import WorkerSettings
from tests.support.fakes.brave import FakeBrave
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.gateway_client import api, wait_status
from tests.support.harness import System
from tests.support.scripts import schema_of
from tests.support.systems import Systems
from tests.support.workers_support import task, unconnected_deps

STOP = "Note: this request stopped at its model calls budget (1 of the 1 left to this request)."


@pytest.fixture(scope="module")
def one_call(systems: Systems, fake_brave: FakeBrave) -> Iterator[System]:
    yield from systems.run(
        workers="RESEARCH", auth=True, brave=fake_brave, SIDEKICK_BUDGET_REQUEST_CALLS="1"
    )


async def test_a_research_workflow_out_of_budget_after_its_plan_ends_partial_with_sources(
    one_call: System, fake_llm: FakeOpenAI
) -> None:
    async with api(one_call.http_url, "ivan") as http:
        created = await http.post("/api/workflows", json={"text": "research the tide tables"})
        assert created.status_code == 201, created.text
        done = await wait_status(http, created.json()["workflow_id"], "partial", "failed")
    assert done["status"] == "partial", done
    answer = done["final_output"]["response"]
    # The best it had: the sources the plan's search found, then the note naming the limit.
    assert answer.startswith("The research stopped before its answer was written."), answer
    assert "[1] [About research the tide tables](https://example.org/" in answer
    assert answer.endswith(STOP), answer
    # The planner was the one call the budget allowed; the synthesizer was never asked.
    asked = [schema_of(c) for c in fake_llm.chat_calls("fake-worker")]
    assert asked == ["ResearchPlan"]
    assert fake_llm.chat_calls("fake-evaluator") == []


async def test_a_plan_invalid_once_is_not_repaired_when_the_budget_allows_no_more_calls(
    one_call: System, fake_llm: FakeOpenAI
) -> None:
    """The LLM client would repair an invalid reply with a second call; with one model call
    left to the request that repair is never sent: the request fails naming the limit."""
    replies = iter(["this is not a plan"])
    fake_llm.script("fake-worker", lambda body: next(replies, "never asked"))
    async with api(one_call.http_url, "ivan") as http:
        created = await http.post("/api/workflows", json={"text": "research the ferry times"})
        assert created.status_code == 201, created.text
        done = await wait_status(http, created.json()["workflow_id"], "partial", "failed")
    assert done["status"] == "failed", done
    assert len(fake_llm.chat_calls("fake-worker")) == 1  # the plan; its repair was not made
    assert "model calls budget (1 of the 1 left to this request)" in json.dumps(done), done
    assert fake_llm.chat_calls("fake-evaluator") == []


def research(fake_llm: FakeOpenAI, brave: FakeBrave) -> ResearchWorker:
    """The worker, its plans' replies limited to 100 tokens and its answers' to 1,000."""
    settings = WorkerSettings(brave_api_key=brave.token, brave_base_url=brave.url)
    llm = fake_llm.client("worker", "fake-worker", max_tokens_short=100, max_tokens_answer=1000)
    return ResearchWorker(replace(unconnected_deps(fake_llm, ""), llm=llm), settings)


async def test_research_stops_at_a_tokens_budget_before_the_call_that_would_pass_it(
    fake_llm: FakeOpenAI, fake_brave: FakeBrave
) -> None:
    """Each call's maximum (its prompt, estimated, and its max_tokens) is counted in advance: a
    budget one token short of the planner's maximum allows no call; exactly its maximum allows
    the planner and not the synthesizer, whose maximum (1,000 tokens of answer) would pass
    what is left."""
    asked = task("RESEARCH", "What changed in the tide tables?")
    by_calls = asked.model_copy(update={"budget": TaskBudget(tokens=10**6, calls=1)})
    one = await research(fake_llm, fake_brave).run(by_calls)
    assert one.budget_stop == "model calls budget (1 of the 1 left to this request)"
    (plan_call,) = fake_llm.chat_calls("fake-worker")
    planner_max = call_maximum(plan_call["messages"], plan_call)
    short = asked.model_copy(update={"budget": TaskBudget(tokens=planner_max - 1, calls=10)})
    nothing = await research(fake_llm, fake_brave).run(short)
    assert nothing.budget_stop == (
        f"tokens budget (0 of the {planner_max - 1} left to this request, and the next call "
        f"could take {planner_max} more)"
    )
    assert not nothing.success and nothing.output == "" and nothing.usage.calls == 0
    assert len(fake_llm.chat_calls("fake-worker")) == 1  # still only the first run's planner
    exact = asked.model_copy(update={"budget": TaskBudget(tokens=planner_max, calls=10)})
    stopped = await research(fake_llm, fake_brave).run(exact)
    assert (stopped.budget_stop or "").startswith(
        f"tokens budget (18 of the {planner_max} left to this request, and the next call could "
        "take "
    ), stopped.budget_stop
    assert stopped.success and stopped.sources and stopped.usage.calls == 1
    assert [schema_of(c) for c in fake_llm.chat_calls("fake-worker")] == ["ResearchPlan"] * 2
    # Nothing left at all: no call, no output, the limit named.
    spent = asked.model_copy(update={"budget": TaskBudget(tokens=10**6, calls=0)})
    none = await research(fake_llm, fake_brave).run(spent)
    assert not none.success and none.output == "" and none.usage.calls == 0
    assert none.budget_stop == "model calls budget (0 of the 0 left to this request)"
    assert len(fake_llm.chat_calls("fake-worker")) == 2
    # On a retry the earlier answer is the best so far, not this attempt's list of sources.
    retry = exact.model_copy(update={"attempt": 2, "previous_output": "An earlier answer."})
    after = await research(fake_llm, fake_brave).run(retry)
    assert after.budget_stop is not None and not after.success and after.output == ""
