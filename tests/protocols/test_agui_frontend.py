"""AG-UI frontend tools and context against the real system, over plain HTTP: a client's tool is
offered to the model beside Sidekick's own and handed back to the client, the request waits for
its result and goes on once; context reaches the models as delimited data; and the attacks:
a result from another principal, for a call never issued, given twice or twice at once, words
in place of a result, and a client tool named like one of Sidekick's."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from tests.support.agui import BOOKING, answering, calls_of, run, run_input, text
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.gateway_client import bearer
from tests.support.harness import System
from tests.support.scripts import books

PAGE = {"description": "The page the user is on", "value": "Trattoria Roma, table booking form"}


def steps(got: list[Any]) -> list[str]:
    return [e.json["stepName"] for e in got if e.json["type"] == "STEP_STARTED"]


async def test_a_frontend_tool_is_handed_to_the_client_and_its_result_resumes_the_run_once(
    system: System, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script("fake-worker", books)
    first = run_input("Book a table for two at seven", tools=[BOOKING], context=[PAGE])
    got = await run(system.http_url, first)
    assert "decided: TOOLS" in steps(got)  # a client that brings tools gets the TOOLS worker
    assert fake_llm.chat_calls("fake-frontline") == []  # never answered without its tools
    calls = calls_of(got)
    assert [(c["toolCallName"], json.loads(c["args"])) for c in calls] == [
        ("confirm_booking", {"people": 2, "time": "19:00"})
    ]
    assert not [e for e in got if e.json["type"] == "TOOL_CALL_RESULT"]  # the client runs it
    assert got[-1].json["outcome"] == {"type": "success", "pendingToolCallIds": ["call_book_1"]}

    (asked,) = fake_llm.chat_calls("fake-worker")
    offered = {t["function"]["name"]: t["function"] for t in asked["tools"]}
    assert {"files_list", "confirm_booking"} <= set(offered)  # beside Sidekick's own
    assert offered["confirm_booking"]["description"].startswith("[App tool")  # as the app's
    assert offered["confirm_booking"]["parameters"] == BOOKING["parameters"]
    system_prompt, prompt = asked["messages"][0]["content"], asked["messages"][-1]["content"]
    assert "Trattoria Roma" not in system_prompt  # context is never an instruction
    block = prompt[prompt.index("<app-context>") :]
    assert "Trattoria Roma, table booking form" in block and block.endswith("</app-context>")
    (decision,) = fake_llm.chat_calls("fake-orchestrator")
    assert "Trattoria Roma" in decision["messages"][-1]["content"]

    resumed = await run(system.http_url, answering(first, calls, "confirmed by the user"))
    assert resumed[0].json["type"] == "RUN_STARTED"
    assert resumed[-1].json["outcome"] == {"type": "success"}
    assert text(resumed) == "Booked: confirmed by the user"
    carried = fake_llm.chat_calls("fake-worker")[1]["messages"]
    assert carried[-2]["tool_calls"][0]["id"] == "call_book_1"  # the model's own turn, then
    assert carried[-1] == {  # the app's result, as data in a tool message
        "role": "tool",
        "tool_call_id": "call_book_1",
        "content": "confirmed by the user",
    }

    async with httpx.AsyncClient(base_url=system.http_url, timeout=30) as http:
        again = await http.post("/ag-ui", json=answering(first, calls, "confirmed twice"))
    assert again.status_code == 409  # a result resumes the run once
    assert "no tool call waiting" in again.json()["error"]["message"]
    assert len(fake_llm.chat_calls("fake-worker")) == 2


async def test_two_results_sent_at_once_resume_the_run_once(
    system: System, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script("fake-worker", books)
    first = run_input("Book a table for two at seven", tools=[BOOKING])
    calls = calls_of(await run(system.http_url, first))
    one, two = answering(first, calls, "yes"), answering(first, calls, "yes")
    async with httpx.AsyncClient(base_url=system.http_url, timeout=90) as http:
        answers = await asyncio.gather(http.post("/ag-ui", json=one), http.post("/ag-ui", json=two))
    assert sorted(a.status_code for a in answers) == [200, 409]
    assert len(fake_llm.chat_calls("fake-worker")) == 2  # the run went on exactly once


async def test_only_the_principal_results_for_its_own_calls_and_nothing_else_answer_the_wait(
    secure_system: System, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script("fake-worker", books)
    base, ella, fred = secure_system.http_url, bearer("ella"), bearer("fred")
    first = run_input("Book a table for two at seven", tools=[BOOKING])
    calls = calls_of(await run(base, first, headers=ella))
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        # Another principal, on the same thread id and with the right call id: not its wait.
        stolen = await http.post("/ag-ui", json=answering(first, calls, "no"), headers=fred)
        assert stolen.status_code == 409
        forged = [{**c, "toolCallId": "call_never_issued"} for c in calls]
        unknown = await http.post("/ag-ui", json=answering(first, forged, "no"), headers=ella)
        assert unknown.status_code == 409
        assert "never issued" in unknown.json()["error"]["message"]
        words = run_input("yes, book it", thread=first["threadId"])
        said = await http.post("/ag-ui", json=words, headers=ella)
        assert said.status_code == 409  # words do not stand in for the tool's result
        assert "tool calls (confirm_booking)" in said.json()["error"]["message"]
        interrupt = run_input("", thread=first["threadId"])
        interrupt["resume"] = [{"interruptId": "x-tools-1", "status": "resolved", "payload": "y"}]
        assert (await http.post("/ag-ui", json=interrupt, headers=ella)).status_code == 409
    assert len(fake_llm.chat_calls("fake-worker")) == 1  # none of that moved the request
    resumed = await run(base, answering(first, calls, "confirmed"), headers=ella)
    assert text(resumed) == "Booked: confirmed"


async def test_a_client_tool_may_not_take_a_name_of_sidekicks_own(
    secure_system: System, fake_llm: FakeOpenAI
) -> None:
    cases = {
        "notify": {"name": "notify", "description": "Send nothing"},
        "an MCP tool's form": {"name": "files__read", "description": "x"},
        "twice": [BOOKING, BOOKING],
        "no object schema": {"name": "pick", "description": "x", "parameters": {"type": "array"}},
        "not a function name": {"name": "pick one!", "description": "x"},
    }
    async with httpx.AsyncClient(base_url=secure_system.http_url, timeout=30) as http:
        for case, declared in cases.items():
            tools = declared if isinstance(declared, list) else [declared]
            body = run_input("Book a table", tools=tools)
            refused = await http.post("/ag-ui", json=body, headers=bearer("fred"))
            assert refused.status_code == 422, case
            assert refused.json()["error"]["message"], case
    assert fake_llm.chat_calls("fake-worker") == []
