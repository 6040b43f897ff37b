"""The AG-UI endpoint against the real system: whole event sequences (direct, routed with a
retry, a tool call, a clarification interrupt and its resume, a cancel, a model failure), each
event validated against ag-ui-protocol's models, and re-attaching to a run after a dropped
connection and after the gateway it was read from was SIGKILLed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from itertools import groupby
from typing import Any

import httpx

from tests.support.agui import run_input, text, unframed
from tests.support.fakes.openai_server import FakeOpenAI, Reply, tool_call
from tests.support.gateway_client import bearer
from tests.support.harness import System
from tests.support.protocols import Reader, ag_ui_run, ag_ui_stream, read
from tests.support.scripts import decide_tools, held, in_turn, tool_results, verdict
from tests.support.sse import Sse


def kinds(got: list[Sse]) -> list[str]:
    """The event types in order, runs of one type folded into one."""
    return [k for k, _ in groupby(e.json["type"] for e in got)]


def steps(got: list[Sse]) -> list[str]:
    return [e.json["stepName"] for e in got if e.json["type"] == "STEP_STARTED"]


def ids(got: list[Sse]) -> list[tuple[int, int]]:
    found = []
    for e in got:
        assert e.id is not None
        seq, _, k = e.id.partition(".")
        found.append((int(seq), int(k)))
    return found


async def test_a_direct_answer_is_one_run_of_streamed_text(system: System) -> None:
    got = await ag_ui_run(system.http_url, run_input("Hello, how are you?"))
    assert kinds(got) == [
        "RUN_STARTED",
        "STATE_SNAPSHOT",
        "STEP_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "STEP_FINISHED",
        "STATE_DELTA",
        "RUN_FINISHED",
    ]
    assert steps(got) == ["answering directly"]
    assert text(got) == "Hello there! How can I help you today?"
    finished = got[-1].json
    assert finished["outcome"] == {"type": "success"}
    assert finished["result"]["route"] == "direct"
    assert finished["usage"] and finished["usage"][0]["totalTokens"] > 0
    assert ids(got) == sorted(set(ids(got)))  # every event has its own, increasing id


async def test_a_routed_answer_shows_its_steps_and_the_retry(
    system: System, fake_llm: FakeOpenAI
) -> None:
    in_turn(
        fake_llm, "fake-evaluator", verdict(False, 30, "Too vague."), verdict(True, 90, "Good.")
    )
    got = await ag_ui_run(system.http_url, run_input("Please route: compare two databases"))
    assert steps(got) == [
        "routed",
        "decided: GENERAL",
        "attempt 1",
        "evaluating attempt 1",
        "attempt 2",
        "evaluating attempt 2",
    ]
    deltas = [op for e in got if e.json["type"] == "STATE_DELTA" for op in e.json["delta"]]
    verdicts_seen = [op["value"]["passed"] for op in deltas if op["path"] == "/verdict"]
    assert verdicts_seen == [False, True]
    assert [op["value"] for op in deltas if op["path"] == "/attempt"] == [1, 2]
    assert text(got).startswith("Answer to: ")
    assert got[-1].json["type"] == "RUN_FINISHED"
    assert got[-1].json["result"]["attempts"] == 2


async def test_a_tool_call_is_start_args_end_and_result(
    system: System, fake_llm: FakeOpenAI
) -> None:
    def worker(body: dict[str, Any]) -> Reply | str:
        if not tool_results(body):
            return Reply(tool_calls=[tool_call("files_list", {}, "call_list_1")])
        return "Your folder is empty."

    fake_llm.script("fake-orchestrator", decide_tools("List my files"))
    fake_llm.script("fake-worker", worker)
    got = await ag_ui_run(system.http_url, run_input("Please route: list my files"))
    calls = [e.json for e in got if e.json["type"].startswith("TOOL_CALL")]
    assert [c["type"] for c in calls] == [
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
    ]
    assert {c["toolCallId"] for c in calls} == {"call_list_1"}
    assert calls[0]["toolCallName"] == "files_list"
    assert calls[1]["delta"] == "{}"
    assert calls[3]["role"] == "tool" and calls[3]["content"]
    assert got[-1].json["type"] == "RUN_FINISHED"


@asynccontextmanager
async def worker_held(
    base: str, body: dict[str, Any], fake_llm: FakeOpenAI, answer: str
) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.Response]]:
    """The run `body` posted to `base`, its response streaming, while the worker's `answer`
    waits until the block ends: (the HTTP client, the response)."""
    with held(fake_llm, "fake-worker", answer):
        async with ag_ui_stream(base, body) as (http, response):
            yield http, response


def asks_once(fake_llm: FakeOpenAI) -> None:
    said = iter([verdict(False, 20, "Which city?", user_input_needed=True, questions=["City?"])])
    fake_llm.script("fake-evaluator", lambda body: next(said, verdict(True, 90, "Good.")))


async def test_a_clarification_is_an_interrupt_that_the_next_run_resumes(
    system: System, fake_llm: FakeOpenAI
) -> None:
    asks_once(fake_llm)
    first = run_input("Please route: weather tomorrow")
    got = await ag_ui_run(system.http_url, first)
    finished = got[-1].json
    assert finished["type"] == "RUN_FINISHED"
    assert finished["outcome"]["type"] == "interrupt"
    (interrupt,) = finished["outcome"]["interrupts"]
    assert interrupt["reason"] == "input_required"
    assert "City?" in interrupt["message"]
    assert interrupt["responseSchema"]["type"] == "object"
    resume = [{"interruptId": interrupt["id"], "status": "resolved", "payload": "Paris"}]
    second = run_input("", thread=first["threadId"], resume=resume)
    resumed = await ag_ui_run(system.http_url, second)
    assert resumed[0].json["type"] == "RUN_STARTED"
    assert resumed[0].json["runId"] == second["runId"]
    assert resumed[-1].json["type"] == "RUN_FINISHED"
    assert resumed[-1].json["outcome"] == {"type": "success"}
    assert "Paris" in str(fake_llm.chat_calls("fake-worker")[-1])
    # Answering the same interrupt again: a clear refusal, and nothing moves.
    again = run_input("", thread=first["threadId"], resume=resume)
    async with httpx.AsyncClient(base_url=system.http_url) as http:
        refused = await http.post("/ag-ui", json=again)
        assert refused.status_code == 409
        assert "no open interrupt" in refused.json()["error"]["message"]
        stale = run_input("", thread=first["threadId"])
        stale["resume"] = [{"interruptId": "not-an-interrupt", "status": "resolved"}]
        assert (await http.post("/ag-ui", json=stale)).status_code == 409


async def test_a_cancelled_run_finishes_with_outcome_cancelled(
    system: System, fake_llm: FakeOpenAI
) -> None:
    body = run_input("Please route: a long job")
    async with worker_held(system.http_url, body, fake_llm, "late") as (http, response):
        reader = Reader(response)
        await reader.upto("attempt 1")
        cancelled = await http.post(f"/ag-ui/runs/{body['runId']}/cancel")
        assert cancelled.status_code == 202
        got = await reader.upto()
    assert got[-1].json["type"] == "RUN_FINISHED"
    assert got[-1].json["outcome"] == {"type": "cancelled"}


async def test_a_model_failure_ends_the_run_with_run_error(
    system: System, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script("fake-frontline", lambda body: Reply(status=503, error="overloaded"))
    got = await ag_ui_run(system.http_url, run_input("Hello?"))
    assert kinds(got)[:2] == ["RUN_STARTED", "STATE_SNAPSHOT"]
    error = got[-1].json
    assert error["type"] == "RUN_ERROR"
    assert error["code"] == "llm_unavailable"
    assert error["message"]


async def reattached(base: str, run_id: str, last: str | None) -> list[Sse]:
    headers = {"Last-Event-ID": last} if last else {}
    async with (
        httpx.AsyncClient(base_url=base, timeout=90) as http,
        http.stream("GET", f"/ag-ui/runs/{run_id}", headers=headers) as response,
    ):
        got = await read(response)
    return unframed(got, run_id) if last else got


async def seen_once_each(base: str, run_id: str, before: list[Sse], rest: list[Sse]) -> None:
    """The events read before the break and after it are the whole run read again from its
    start: nothing missed, nothing twice, each the same."""
    whole = await reattached(base, run_id, None)
    assert ids(before + rest) == ids(whole)
    assert [e.data for e in before + rest] == [e.data for e in whole]


async def test_a_dropped_stream_is_resumed_from_its_last_event_id_without_duplicates(
    system: System, fake_llm: FakeOpenAI
) -> None:
    body = run_input("Please route: slow work")
    # The answer comes when the block ends, while no client is connected.
    async with worker_held(system.http_url, body, fake_llm, "Done at last.") as (_, response):
        before = await read(response, until="attempt 1")
    rest = await reattached(system.http_url, body["runId"], before[-1].id)
    await seen_once_each(system.http_url, body["runId"], before, rest)
    assert rest[-1].json["type"] == "RUN_FINISHED"
    assert text(rest) == "Done at last."


async def test_a_run_is_re_attached_through_another_gateway_after_a_sigkill(
    system: System, fake_llm: FakeOpenAI
) -> None:
    replica = await asyncio.to_thread(system.replica)
    name = "gateway:" + replica.rsplit(":", 1)[1]
    body = run_input("Please route: survive a crash")
    async with worker_held(replica, body, fake_llm, "Survived.") as (http, response):
        before = await read(response, until="attempt 1")
        system.kill(name)  # mid-stream, with no goodbye
    # The client goes on through the other gateway, with the POST it sent and its last id.
    async with (
        httpx.AsyncClient(base_url=system.http_url, timeout=90) as http,
        http.stream(
            "POST", "/ag-ui", json=body, headers={"Last-Event-ID": before[-1].id or ""}
        ) as response,
    ):
        rest = unframed(await read(response), body["runId"])
    await seen_once_each(system.http_url, body["runId"], before, rest)
    assert text(rest) == "Survived."


async def test_another_principals_run_is_not_found_and_tokens_are_required(
    secure_system: System,
) -> None:
    base = secure_system.http_url
    body = run_input("Hello, it is Max")
    async with httpx.AsyncClient(base_url=base, timeout=90) as anonymous:
        assert (await anonymous.post("/ag-ui", json=body)).status_code == 401
    async with httpx.AsyncClient(base_url=base, timeout=90, headers=bearer("max")) as max_:
        async with max_.stream("POST", "/ag-ui", json=body) as response:
            got = await read(response)
        assert got[-1].json["type"] == "RUN_FINISHED"
    async with httpx.AsyncClient(base_url=base, timeout=90, headers=bearer("nia")) as nia:
        assert (await nia.get(f"/ag-ui/runs/{body['runId']}")).status_code == 404
        assert (await nia.post(f"/ag-ui/runs/{body['runId']}/cancel")).status_code == 404
        bad = {"Last-Event-ID": "not-an-id"}
        assert (await nia.post("/ag-ui", json=run_input("hi"), headers=bad)).status_code == 422
