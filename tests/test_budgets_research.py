"""Budgets inside the research worker: it checks the task's budget before each of its model
calls (planner, synthesizer), so a request whose budget runs out mid-research ends partial with
the sources found and a note naming the limit, and the synthesizer is never called. Every fake
model call reports 11 tokens in and 7 out."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from contracts.events import TaskBudget
from services.runtime.bus.natsserver import NatsServer
from services.workers.research import ResearchWorker
from services.workers.settings import WorkerSettings
from tests.support.fakes.brave import FakeBrave
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.gateway_client import api, tokens_env, wait_status
from tests.support.harness import System, llm_env
from tests.support.workers_support import schema_of, task, unconnected_deps

STOP = "Note: this request stopped at its model calls budget (1 of the 1 left to this request)."


@pytest.fixture(scope="module")
def one_call(
    nats_server: NatsServer, fake_llm: FakeOpenAI, fake_brave: FakeBrave, logs_dir: Path
) -> Iterator[System]:
    env = {
        **llm_env(fake_llm.base_url),
        "BRAVE_SEARCH_API_KEY": fake_brave.token,
        "SIDEKICK_BRAVE_BASE_URL": fake_brave.url,
        "SIDEKICK_WORKERS": "RESEARCH",
        "SIDEKICK_AUTH_TOKENS": tokens_env(),
        "SIDEKICK_BUDGET_REQUEST_CALLS": "1",
    }
    with System(nats_server.url, env, logs_dir).start_all() as sys_:
        yield sys_


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


def research(fake_llm: FakeOpenAI, brave: FakeBrave) -> ResearchWorker:
    settings = WorkerSettings(brave_api_key=brave.token, brave_base_url=brave.url)
    return ResearchWorker(unconnected_deps(fake_llm, ""), settings)


async def test_research_stops_at_a_tokens_budget_before_the_call_that_would_pass_it(
    fake_llm: FakeOpenAI, fake_brave: FakeBrave
) -> None:
    asked = task("RESEARCH", "What changed in the tide tables?")
    # 18 tokens a call: 15 left allows the planner (0 spent), not the synthesizer (18 spent).
    # (A call's own max_tokens is not counted in advance here.)
    by_tokens = asked.model_copy(update={"budget": TaskBudget(tokens=15, calls=10)})
    stopped = await research(fake_llm, fake_brave).run(by_tokens)
    assert stopped.budget_stop == "tokens budget (18 of the 15 left to this request)"
    assert stopped.success and stopped.sources and stopped.usage.calls == 1
    assert [schema_of(c) for c in fake_llm.chat_calls("fake-worker")] == ["ResearchPlan"]
    # Nothing left at all: no call, no output, the limit named.
    spent = asked.model_copy(update={"budget": TaskBudget(tokens=30, calls=0)})
    nothing = await research(fake_llm, fake_brave).run(spent)
    assert not nothing.success and nothing.output == "" and nothing.usage.calls == 0
    assert nothing.budget_stop == "model calls budget (0 of the 0 left to this request)"
    assert len(fake_llm.chat_calls("fake-worker")) == 1
    # On a retry the earlier answer is the best so far, not this attempt's list of sources.
    retry = by_tokens.model_copy(update={"attempt": 2, "previous_output": "An earlier answer."})
    after = await research(fake_llm, fake_brave).run(retry)
    assert after.budget_stop is not None and not after.success and after.output == ""
