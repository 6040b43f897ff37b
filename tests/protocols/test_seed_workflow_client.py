"""What the workflow seed's clients rely on, played as they call the API: its end-to-end test
(create on `/api/workflows/`, poll every couple of seconds, answer questions with the seed's
approval word), its QA suite ("Plan a trip." is planned and asked about, `final_output.response`
holds the answer), its React page (a list from `GET /api/workflows/`, `state.user_request`,
`state.created_at`, `state.chat_history`, the one-field answer `{"responses": {"clarification":
...}}`, chat, preferences, CORS from its own origin) and its health check."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.gateway_client import api, wait_status
from tests.support.harness import Client, System
from tests.support.scripts import default_worker, last_user, research_plan, structured

TRIP_QUESTIONS = ["Where would you like to go?", "What is your budget?"]
ANSWERED = "The user answered these questions"


def planner_asks_about_trips(fake_llm: FakeOpenAI) -> None:
    """The research planner asks where and how much for a trip it knows nothing of; the
    synthesizer writes from what the user answered."""

    def worker(body: dict[str, Any]) -> Any:
        text = last_user(body)
        schema = structured(body)
        if schema == "ResearchPlan" and "trip" in text.lower() and ANSWERED not in text:
            return research_plan("Plan a trip", TRIP_QUESTIONS)
        if schema == "ResearchSynthesis" and ANSWERED in text:
            said = text.split(ANSWERED, 1)[1].strip()
            return {
                "answer_markdown": f"Your trip plan. {said}",
                "confidence": "high",
                "citations": [1],
            }
        return default_worker(body)

    fake_llm.script("fake-worker", worker)


@pytest.fixture
async def http(system: System, fake_llm: FakeOpenAI) -> AsyncIterator[httpx.AsyncClient]:
    """The seed's client on the shared system, whose planner asks about trips."""
    planner_asks_about_trips(fake_llm)
    async with httpx.AsyncClient(base_url=system.http_url, timeout=30) as client:
        yield client


async def trip_awaiting_answers(http: httpx.AsyncClient, text: str) -> str:
    """A new workflow for `text`, once the planner's questions wait for answers: its id."""
    created = await http.post("/api/workflows/", json={"text": text})
    workflow_id: str = created.json()["workflow_id"]
    await wait_status(http, workflow_id, "awaiting_clarification")
    return workflow_id


async def test_the_seed_end_to_end_test_runs_as_it_is_written(http: httpx.AsyncClient) -> None:
    created = await http.post(
        "/api/workflows/", json={"text": "Plan a trip to Paris for two with 300 euros."}
    )
    assert created.status_code == 201 and created.json()["status"] == "started"
    workflow_id = created.json()["workflow_id"]
    answered = False
    for _ in range(300):
        data = (await http.get(f"/api/workflows/{workflow_id}")).json()
        if data["status"] == "completed":
            break
        assert data["status"] != "failed", data
        if data["status"] == "awaiting_clarification":
            questions = data["state"]["clarification_questions"]
            payload = {
                "responses": {q["id"]: "This is a test answer" for q in questions},
                "ratings": {q["id"]: 5 for q in questions},
                "approval": "approved",
            }
            sent = await http.post(f"/api/workflows/{workflow_id}/feedback", json=payload)
            assert sent.status_code == 200, sent.text
            assert sent.json()["status"] == "resumed"
            answered = True
        await asyncio.sleep(0.1)
    assert answered and data["status"] == "completed" and data["final_output"] is not None


async def test_plan_a_trip_is_planned_asked_about_and_completed_with_the_answers(
    http: httpx.AsyncClient, fake_llm: FakeOpenAI
) -> None:
    created = await http.post("/api/workflows", json={"text": "Plan a trip.", "skip_cache": True})
    workflow_id = created.json()["workflow_id"]
    parked = await wait_status(http, workflow_id, "awaiting_clarification")
    state = parked["state"]
    assert [q["question"] for q in state["clarification_questions"]] == TRIP_QUESTIONS
    assert [q["id"] for q in state["clarification_questions"]] == ["q1", "q2"]
    assert state["user_request"] == "Plan a trip." and state["created_at"]
    assert [t["role"] for t in state["chat_history"]] == ["user", "assistant"]
    assert "What is your budget?" in state["chat_history"][1]["content"]

    answer = "Tokyo, Japan. Budget is $5000. 1 week duration."
    sent = await http.post(
        f"/api/workflows/{workflow_id}/feedback", json={"responses": {"q1": answer}}
    )
    assert sent.status_code == 200
    done = await wait_status(http, workflow_id, "completed", "failed")
    response = done["final_output"]["response"]
    for word in ("Tokyo", "$5000", "Japan"):
        assert word in response
    assert [t["role"] for t in done["state"]["chat_history"]] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert done["state"]["chat_history"][-1]["content"] == response
    # Planned by the research pipeline; the frontline never saw it.
    assert not any("Plan a trip." in json.dumps(c) for c in fake_llm.chat_calls("fake-frontline"))


async def test_the_pages_one_field_answer_resumes_the_workflow(http: httpx.AsyncClient) -> None:
    workflow_id = await trip_awaiting_answers(http, "Plan a trip, please")
    sent = await http.post(
        f"/api/workflows/{workflow_id}/feedback",
        json={"responses": {"clarification": "Lisbon, in May, about $900"}},
    )
    assert sent.status_code == 200, sent.text
    done = await wait_status(http, workflow_id, "completed")
    assert "Lisbon, in May, about $900" in done["final_output"]["response"]


async def test_of_ten_concurrent_answers_exactly_one_is_accepted_and_nine_get_409(
    http: httpx.AsyncClient, fake_llm: FakeOpenAI
) -> None:
    workflow_id = await trip_awaiting_answers(http, "Plan a trip for us")
    url = f"/api/workflows/{workflow_id}/feedback"
    sent = await asyncio.gather(
        *(http.post(url, json={"responses": {"q1": f"answer {n}"}}) for n in range(10))
    )
    codes = sorted(r.status_code for r in sent)
    assert codes == [200] + [409] * 9, [r.text for r in sent]
    assert all(r.json()["detail"] for r in sent if r.status_code == 409)
    await wait_status(http, workflow_id, "completed")
    resumed = " ".join(last_user(c) for c in fake_llm.chat_calls("fake-worker"))
    assert len(set(re.findall(r"answer \d", resumed))) == 1  # one answer went on


async def test_of_ten_concurrent_answers_on_sockets_one_is_taken_and_nine_get_conflict(
    system: System, http: httpx.AsyncClient
) -> None:
    workflow_id = await trip_awaiting_answers(http, "Plan a trip for me")
    clients = [Client(system.ws_url, events=True) for _ in range(10)]
    for c in clients:
        await c.__aenter__()
    try:
        await asyncio.gather(
            *(
                c.send({"uuid": c.uuid, "message": f"to Rome {n}", "reply_to": workflow_id})
                for n, c in enumerate(clients)
            )
        )
        firsts = await asyncio.gather(*(c.recv() for c in clients))
    finally:
        for c in clients:
            await c.__aexit__(None, None, None)
    await wait_status(http, workflow_id, "completed")
    acks = [f for f in firsts if f.get("event") == "ack"]
    conflicts = [f["error"] for f in firsts if "error" in f]
    assert len(acks) == 1 and acks[0]["action"] == "answer"
    assert len(conflicts) == 9 and {e["code"] for e in conflicts} == {"conflict"}


async def test_the_seeds_routes_codes_and_shapes(system: System) -> None:
    async with httpx.AsyncClient(base_url=system.http_url, timeout=30) as http:
        health = await http.get("/health")
        assert health.status_code == 200 and health.json()["status"] == "healthy"
        short = await http.post("/api/workflows/", json={"text": "too short"})
        assert short.status_code == 422
        assert short.json()["detail"][0]["loc"] == ["body", "text"]
        missing = await http.get("/api/workflows/0123456789abcdef")
        assert missing.status_code == 404 and isinstance(missing.json()["detail"], str)
        spec = (await http.get("/openapi.json")).json()
        assert "/api/workflows/" in spec["paths"] and spec["openapi"].startswith("3.")

        workflow_id = (
            await http.post("/api/workflows", json={"text": "search the old tides"})
        ).json()["workflow_id"]
        await wait_status(http, workflow_id, "completed")
        for path in ("/api/workflows", "/api/workflows/"):  # both, without a redirect
            listed = await http.get(path)
            assert listed.status_code == 200 and isinstance(listed.json(), list)
        item = next(w for w in listed.json() if w["workflow_id"] == workflow_id)
        assert item["state"]["user_request"] == "search the old tides"
        assert item["state"]["created_at"] and item["final_output"]["response"]

        chat = await http.post(f"/api/workflows/{workflow_id}/chat", json={"message": "hello"})
        assert chat.status_code == 200, chat.text
        assert chat.json()["response"] == "Hello there! How can I help you today?"
        assert [t["content"] for t in chat.json()["history"]][-2:] == [
            "hello",
            "Hello there! How can I help you today?",
        ]

        assert (await http.delete(f"/api/workflows/{workflow_id}")).status_code == 204
        assert (await http.get(f"/api/workflows/{workflow_id}")).status_code == 404
        assert workflow_id not in [
            w["workflow_id"] for w in (await http.get("/api/workflows/")).json()
        ]


async def test_the_seeds_page_may_call_from_its_own_origin_only(secure_system: System) -> None:
    page = "http://localhost:5173"  # SIDEKICK_CORS_ORIGINS of the secure system
    async with httpx.AsyncClient(base_url=secure_system.http_url, timeout=30) as http:
        preflight = await http.options(
            "/api/workflows/",
            headers={
                "Origin": page,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type,authorization",
            },
        )
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == page
        stranger = await http.options(
            "/api/workflows/",
            headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"},
        )
        assert "access-control-allow-origin" not in stranger.headers
    async with api(secure_system.http_url, "alan") as http:
        listed = await http.get("/api/workflows/", headers={"Origin": page})
        assert listed.headers["access-control-allow-origin"] == page


async def test_preferences_are_kept_per_principal_and_given_to_the_planner(
    secure_system: System, fake_llm: FakeOpenAI
) -> None:
    async with (
        api(secure_system.http_url, "beth") as http,
        api(secure_system.http_url, "cody") as other,
    ):
        saved = await http.post("/api/preferences/", json={"key": "Budget", "value": "low"})
        assert saved.status_code == 200 and saved.json() == {"key": "Budget", "value": "low"}
        assert (await http.get("/api/preferences/")).json() == {"preferences": {"Budget": "low"}}
        assert (await other.get("/api/preferences")).json() == {"preferences": {}}

        workflow_id = (
            await http.post("/api/workflows/", json={"text": "search cheap dinners"})
        ).json()["workflow_id"]
        await wait_status(http, workflow_id, "completed")
        plans = [c for c in fake_llm.chat_calls("fake-worker") if structured(c) == "ResearchPlan"]
        assert "- Budget: low" in last_user(plans[-1])

        assert (await http.delete("/api/preferences/Budget")).status_code == 204
        gone = await http.delete("/api/preferences/Budget")
        assert gone.status_code == 404 and gone.json()["detail"] == "Preference not found"
