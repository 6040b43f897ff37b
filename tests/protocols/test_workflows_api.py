"""The workflows HTTP API on live services: create, get, list, feedback, cancel, errors."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from contracts import CancelRequested, Subjects
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.gateway_client import api, wait_status
from tests.support.harness import System
from tests.support.scripts import evaluator_asks, evaluator_held


async def test_a_workflow_is_created_read_and_listed_newest_first(
    secure_system: System,
) -> None:
    async with api(secure_system.http_url, "grace") as http:
        created = await http.post(
            "/api/workflows", json={"text": "search the tides", "success_criteria": "one line"}
        )
        assert created.status_code == 201, created.text
        body = created.json()
        assert set(body) == {"workflow_id", "status", "message"} and body["status"] == "started"
        first = body["workflow_id"]
        assert created.headers["location"] == f"/api/workflows/{first}"

        done = await wait_status(http, first, "completed")
        assert done["final_output"]["response"].startswith("Answer to:")
        assert done["completed_at"] and done["created_at"] <= done["updated_at"]
        state = done["state"]
        assert state["text"] == state["user_request"] == "search the tides"
        assert state["success_criteria"] == "one line"
        assert state["session"] == f"workflow-{first}"
        assert state["clarification_questions"] == []
        assert state["worker_type"] == "RESEARCH"  # a workflow is planned, never direct
        assert state["cached"] is False
        assert {"attempt", "detail", "error", "trace_id"} <= set(state)

        second = (await http.post("/api/workflows", json={"text": "hello there"})).json()[
            "workflow_id"
        ]
        listed = (await http.get("/api/workflows")).json()
        assert [w["workflow_id"] for w in listed] == [second, first]
        assert listed[1]["status"] == "completed"
        assert (await http.get("/api/workflows", params={"limit": 1})).json()[0][
            "workflow_id"
        ] == second

        missing = await http.get("/api/workflows/no-such-workflow")
        assert missing.status_code == 404
        assert missing.json()["error"]["code"] == "not_found"
        assert (await http.delete("/api/workflows/no-such-workflow")).status_code == 404
        await wait_status(http, second, "completed")


async def test_invalid_bodies_get_422_with_a_clear_reason(secure_system: System) -> None:
    async with api(secure_system.http_url, "heidi") as http:
        cases: list[tuple[Any, str]] = [
            ({}, "text"),
            ({"text": 42}, "text"),
            ({"text": ""}, "text"),
            ({"text": "too short"}, "text"),
            ({"text": "ok", "skip_cache": "yes"}, "skip_cache"),
            ([1, 2], "JSON object"),
        ]
        for body, mentioned in cases:
            resp = await http.post("/api/workflows", json=body)
            assert resp.status_code == 422, body
            error = resp.json()["error"]
            assert error["code"] == "invalid_body" and mentioned in error["message"], error
        garbage = await http.post("/api/workflows", content=b"{not json")
        assert garbage.status_code == 422 and "not valid JSON" in garbage.json()["error"]["message"]
        huge = await http.post("/api/workflows", content=b"x" * (300 * 1024))
        assert huge.status_code == 413 and "limited" in huge.json()["error"]["message"]
        detail = (await http.post("/api/workflows", json={"text": 1})).json()["detail"]
        assert detail[0]["loc"] == ["body", "text"]

        rid = (await http.post("/api/workflows", json={"text": "hello there"})).json()[
            "workflow_id"
        ]
        bad = await http.post(f"/api/workflows/{rid}/feedback", json={"responses": ["x"]})
        assert bad.status_code == 422
        await wait_status(http, rid, "completed")


async def test_feedback_resumes_a_parked_workflow_and_is_409_otherwise(
    secure_system: System, fake_llm: FakeOpenAI
) -> None:
    evaluator_asks(fake_llm, "Which city do you mean?")
    async with api(secure_system.http_url, "ivan") as http:
        rid = (await http.post("/api/workflows", json={"text": "search the weather"})).json()[
            "workflow_id"
        ]
        parked = await wait_status(http, rid, "awaiting_clarification")
        questions = parked["state"]["clarification_questions"]
        assert questions == [{"id": "q1", "question": "Which city do you mean?"}]

        unknown = await http.post(f"/api/workflows/{rid}/feedback", json={"responses": {"q9": "x"}})
        assert unknown.status_code == 422 and "q9" in unknown.json()["error"]["message"]

        resumed = await http.post(
            f"/api/workflows/{rid}/feedback",
            json={"responses": {"q1": "Lisbon"}, "approval": True, "ratings": {"plan": 4}},
        )
        assert resumed.status_code == 200, resumed.text
        assert resumed.json()["status"] == "resumed" and resumed.json()["workflow_id"] == rid

        done = await wait_status(http, rid, "completed")
        assert done["state"]["clarification_questions"] == []
        assert "Lisbon" in json.dumps(fake_llm.chat_calls("fake-worker")[-1]["messages"])

        again = await http.post(f"/api/workflows/{rid}/feedback", json={"responses": {"q1": "x"}})
        assert again.status_code == 409
        assert again.json()["error"]["code"] == "conflict"


async def test_deleting_a_workflow_publishes_a_cancel_and_ends_it_cancelled(
    secure_system: System, fake_llm: FakeOpenAI, nc: NATS
) -> None:
    cancels: list[CancelRequested] = []

    async def heard(msg: Msg) -> None:
        cancels.append(CancelRequested.model_validate_json(msg.data))

    sub = await nc.subscribe(Subjects(secure_system.namespace).request_cancel, cb=heard)
    try:
        with evaluator_held(fake_llm):
            async with api(secure_system.http_url, "judy") as http:
                rid = (await http.post("/api/workflows", json={"text": "search slowly"})).json()[
                    "workflow_id"
                ]
                while not fake_llm.chat_calls("fake-evaluator"):  # noqa: ASYNC110 - a fake's record
                    await asyncio.sleep(0.05)
                deleted = await http.delete(f"/api/workflows/{rid}")
                assert deleted.status_code == 204
                # Removed: no longer found nor listed, as the seed's DELETE does.
                gone = await http.get(f"/api/workflows/{rid}")
                assert gone.status_code == 404 and gone.json()["detail"]
                assert (await http.get("/api/workflows/")).json() == []
                assert [c.request_id for c in cancels] == [rid]
                assert cancels[0].session_id == f"judy/workflow-{rid}"
                assert (await http.delete(f"/api/workflows/{rid}")).status_code == 404
                assert len(cancels) == 1
    finally:
        await sub.unsubscribe()
