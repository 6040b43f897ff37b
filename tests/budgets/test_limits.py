"""Tool-call and session limits on live services (the TOOLS worker's files tools on a folder of
its own): a request whose tool loop reaches its tool calls budget ends partial with the model's
answer from what the tools gave and a note naming the limit; a session whose spend reaches its
budget has its step refused, then every new request in it refused at the gateway, while another
session of the same principal goes on."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.dirs import searchable_root
from tests.support.fakes.openai_server import FakeOpenAI, Reply, tool_call
from tests.support.gateway_client import AuthClient, api
from tests.support.harness import System
from tests.support.scripts import decide_tools, tool_results
from tests.support.systems import Systems

SESSION_TOKENS = 20_000


files = searchable_root()


@pytest.fixture(scope="module")
def limited(systems: Systems, files: Path) -> Iterator[System]:
    yield from systems.run(
        workers="GENERAL,TOOLS",
        auth=True,
        SIDEKICK_FILES_ROOT=str(files),
        SIDEKICK_BUDGET_REQUEST_TOOL_CALLS="3",
        SIDEKICK_BUDGET_SESSION_TOKENS=str(SESSION_TOKENS),
        SIDEKICK_LLM_MAX_TOKENS_SHORT="500",
        SIDEKICK_LLM_MAX_TOKENS_ANSWER="500",
    )


async def test_a_tool_loop_that_reaches_the_tool_calls_budget_ends_partial_naming_it(
    limited: System, fake_llm: FakeOpenAI
) -> None:
    turns = itertools.count(1)

    def model(body: dict[str, Any]) -> Reply:
        if not body.get("tools"):  # no tools offered any more: it answers with what it has
            return Reply(content=f"From {len(tool_results(body))} listings: the folder is empty.")
        n = next(turns)
        calls = [tool_call("files_list", {}, f"c{n}a"), tool_call("files_list", {}, f"c{n}b")]
        return Reply(tool_calls=calls)

    ask = "search my files, listing them again and again"
    fake_llm.script("fake-orchestrator", decide_tools(ask))
    fake_llm.script("fake-worker", model)
    async with AuthClient(limited.ws_url, "walter", events=True) as walter:
        request_id = await walter.ack(ask)
        done = await walter.until_end_of(request_id)
    assert done.end["status"] == "partial"
    assert done.end["metadata"]["worker_type"] == "TOOLS"
    assert done.text.endswith(
        "From 4 listings: the folder is empty.\n\nNote: this request stopped at its tool calls "
        "budget (3 of the 3 left to this request)."
    ), done.text
    assert done.end["metadata"]["usage"]["tool_calls"] == 3
    # Two turns with tools (3 of their 4 calls run), the answer without: never a fourth run.
    assert len(fake_llm.chat_calls("fake-worker")) == 3
    assert not fake_llm.chat_calls("fake-evaluator")  # stopped: no more steps


async def test_a_session_over_its_budget_is_refused_with_a_clear_message(
    limited: System, fake_llm: FakeOpenAI
) -> None:
    # The worker's reply reports more than the session's whole budget.
    fake_llm.usage_of = lambda body: (
        (SESSION_TOKENS, 7) if body["model"] == "fake-worker" else (11, 7)
    )
    async with AuthClient(limited.ws_url, "victor", events=True) as victor:
        request_id = await victor.ack("search the tides")
        first = await victor.until_end_of(request_id)
        assert first.end["status"] == "partial"  # its answer, the evaluation never held
        # The routing call (18, counted at the handoff), the decision (18), the worker (20,007).
        assert "Note: this request stopped at its session tokens budget (20043 of 20000" in (
            first.text
        )
        assert not fake_llm.chat_calls("fake-evaluator")
        await victor.send({"uuid": victor.uuid, "message": "and about the moon"})
        refused = await victor.frames_until(lambda f: "error" in f)
    assert refused[-1]["error"]["code"] == "rate_limited"
    assert refused[-1]["error"]["message"] == (
        "This session's budget is spent (session tokens: 20043 of 20000); "
        "start a new session to go on."
    )
    fake_llm.usage_of = lambda body: (11, 7)
    async with api(limited.http_url, "victor") as http:  # a new session of the same principal
        other = await http.post("/api/workflows", json={"text": "tell me about the moon"})
        assert other.status_code == 201, other.text
