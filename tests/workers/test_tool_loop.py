"""The tool loop, in process against the fake OpenAI API: tool results go back as `tool`
messages, a tool without its key is an error the model reads (and the loop goes on), and a
model that never answers is stopped at the step limit with an honest result."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contracts import WorkerTask
from contracts.base import TaskBudget
from services.runtime.base.settings import Settings
from services.runtime.budgets.asks import prompt_estimate
from services.runtime.bus.core import Bus
from services.runtime.hosting.host import make_broker
from services.workers.base import WorkerDeps
from services.workers.tools.settings import ToolsSettings
from services.workers.tools.worker import SYSTEM, ToolsWorker
from tests.support.dirs import searchable_dir
from tests.support.fakes.openai_server import FakeOpenAI, Reply, tool_call
from tests.support.scripts import calls_for_ever

MODEL = "fake-tools-loop"


@pytest.fixture
def files_root() -> Iterator[Path]:
    with searchable_dir() as root:
        yield root


def worker(
    fake_llm: FakeOpenAI, tmp_path: Path, max_tokens: int = 0, **settings: Any
) -> ToolsWorker:
    base = Settings(namespace="loop", data_dir=tmp_path)
    llm = fake_llm.client("worker", MODEL, max_tokens_answer=max_tokens)
    deps = WorkerDeps(
        bus=Bus(make_broker(base, "loop-test"), base, "loop-test"), settings=base, llm=llm
    )
    return ToolsWorker(deps, ToolsSettings(brave_api_key="", **settings))


def task(message: str) -> WorkerTask:
    return WorkerTask(
        request_id="req-loop",
        session_id="sess-loop",
        attempt=1,
        worker_type="TOOLS",
        message=message,
        task_description=message,
        success_criteria="A correct answer.",
    )


def tool_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"] if m["role"] == "tool"]


async def test_a_tool_without_its_key_is_an_error_the_model_reads_and_the_loop_goes_on(
    fake_llm: FakeOpenAI, tmp_path: Path
) -> None:
    def model(body: dict[str, Any]) -> Reply:
        results = tool_messages(body)
        if not results:
            return Reply(tool_calls=[tool_call("web_search", {"query": "marmalade"}, "call_ws")])
        return Reply(f"I could not search: {results[-1]['content']}")

    fake_llm.script(MODEL, model)
    result = await worker(fake_llm, tmp_path).run(task("search the web for marmalade"))
    assert result.success, result.error
    assert "BRAVE_SEARCH_API_KEY" in result.output
    first, second = fake_llm.chat_calls(MODEL)
    assert {t["function"]["name"] for t in first["tools"]} >= {
        "browser_navigate",
        "browser_text",
        "browser_click",
        "browser_links",
        "python_run",
        "files_read",
        "files_write",
        "files_list",
        "wikipedia_search",
        "wikipedia_page",
        "web_search",
        "notify",
    }
    # The assistant turn with its call goes back, then the result as a tool message.
    assistant = second["messages"][-2]
    assert assistant["tool_calls"][0]["id"] == "call_ws"
    (result_message,) = tool_messages(second)
    assert result_message["tool_call_id"] == "call_ws"
    assert result_message["content"].startswith("ERROR: The web_search tool is not configured")
    assert second["messages"][0] == {"role": "system", "content": SYSTEM}
    assert result.usage.calls == 2


async def test_a_loop_that_never_answers_stops_at_the_step_limit_with_an_honest_result(
    fake_llm: FakeOpenAI, tmp_path: Path
) -> None:
    fake_llm.script(MODEL, calls_for_ever("files_list"))
    result = await worker(fake_llm, tmp_path, tools_max_steps=3).run(task("list my files"))
    assert not result.success and result.output == ""
    assert result.error is not None
    assert "stopped after 3 model turns" in result.error
    assert "without a final answer" in result.error and "not finished" in result.error
    assert "files_list (2 calls)" in result.error  # the calls that ran before the limit
    assert len(fake_llm.chat_calls(MODEL)) == 3
    assert result.usage.calls == 3


async def test_python_and_files_results_go_back_to_the_model(
    fake_llm: FakeOpenAI, tmp_path: Path, files_root: Path
) -> None:
    def model(body: dict[str, Any]) -> Reply:
        results = tool_messages(body)
        if not results:
            return Reply(
                tool_calls=[
                    tool_call("python_run", {"code": "print(6 * 7)"}, "call_py"),
                    tool_call("files_write", {"path": "a.txt", "content": "hi"}, "call_fw"),
                ]
            )
        return Reply("Results: " + json.dumps([r["content"] for r in results]))

    fake_llm.script(MODEL, model)
    result = await worker(fake_llm, tmp_path, files_root=files_root).run(task("compute and save"))
    assert result.success
    contents = json.loads(result.output.removeprefix("Results: "))
    assert "exit status: 0" in contents[0] and "42" in contents[0]
    assert contents[1] == "wrote 2 bytes to a.txt"


async def test_the_requests_budget_stops_the_loop_before_the_call_that_would_pass_it(
    fake_llm: FakeOpenAI, tmp_path: Path
) -> None:
    fake_llm.script(MODEL, calls_for_ever("files_list"))
    budgeted = task("list my files").model_copy(
        update={"budget": TaskBudget(tokens=1_000_000, calls=2)}
    )
    result = await worker(fake_llm, tmp_path, tools_max_steps=10).run(budgeted)
    assert not result.success and not result.retryable
    assert result.error == (
        "stopped before model call 3: the request's model calls budget (2 of the 2 left to "
        "this request) is spent. Tools used: files_list (2 calls). The task was not finished."
    )
    assert len(fake_llm.chat_calls(MODEL)) == 2 and result.usage.calls == 2


async def test_a_call_whose_maximum_could_pass_the_token_budget_is_not_made(
    fake_llm: FakeOpenAI, tmp_path: Path
) -> None:
    """Each call's maximum (its prompt, estimated, and its max_tokens of 100) is counted in
    advance: a budget of 10 tokens allows no call at all; a budget of exactly the first call's
    maximum plus what it used (18) allows it, and not the second, whose prompt is longer."""
    fake_llm.script(MODEL, calls_for_ever("files_list", "c"))
    tools = worker(fake_llm, tmp_path, max_tokens=100, tools_max_steps=10)
    tiny = task("list my files").model_copy(update={"budget": TaskBudget(tokens=10, calls=10)})
    none = await tools.run(tiny)
    assert "the request's tokens budget (0 of the 10 left to this request, and the next call " in (
        none.error or ""
    )
    assert none.budget_stop and none.budget_stop.startswith("tokens budget (0 of the 10 left")
    assert not fake_llm.chat_calls(MODEL)
    one = tiny.model_copy(update={"budget": TaskBudget(tokens=10**6, calls=1)})
    await tools.run(one)
    (first,) = fake_llm.chat_calls(MODEL)
    assert first["max_tokens"] == 100
    first_max = prompt_estimate(first["messages"], first["tools"]) + 100
    exact = tiny.model_copy(update={"budget": TaskBudget(tokens=first_max + 18, calls=10)})
    stopped = await tools.run(exact)
    assert len(fake_llm.chat_calls(MODEL)) == 2  # the first run's call, and this run's one
    assert f"tokens budget (18 of the {first_max + 18} left to this request, and the next" in (
        stopped.error or ""
    )


async def test_the_tool_call_limit_stops_the_tools_and_the_model_answers_with_what_it_has(
    fake_llm: FakeOpenAI, tmp_path: Path
) -> None:
    turns = itertools.count(1)

    def model(body: dict[str, Any]) -> Reply:
        if not body.get("tools"):  # offered none: it answers
            return Reply(content="Two listings so far: no files.")
        n = next(turns)
        return Reply(
            tool_calls=[
                tool_call("files_list", {}, f"c{n}a"),
                tool_call("files_list", {}, f"c{n}b"),
            ]
        )

    fake_llm.script(MODEL, model)
    limited = task("list my files").model_copy(
        update={"budget": TaskBudget(tokens=10**6, calls=10, tool_calls=3)}
    )
    result = await worker(fake_llm, tmp_path, tools_max_steps=10).run(limited)
    assert result.success and result.output == "Two listings so far: no files."
    assert result.usage.tool_calls == 3  # the fourth call asked for was not run
    assert result.budget_stop == "tool calls budget (3 of the 3 left to this request)"
    first, second, last = fake_llm.chat_calls(MODEL)
    assert "tools" in first and "tools" in second and "tools" not in last
    refused = tool_messages(last)[-1]
    assert refused["tool_call_id"] == "c2b"
    assert refused["content"].startswith("Not run: this request's tool calls budget (3 of the 3")
