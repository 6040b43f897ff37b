"""A parked request holds only what it has spent. While a research workflow's planner is asked,
the request holds its step's allowance in its principal's day and its session; once the planner
asks the user a question and the request parks, that hold is settled down to what it used (the
planner's 11 + 7 tokens), so the rest returns to the day while the person thinks; when the answer
resumes it, its next step holds again; when it ends, its spend is counted and no hold is left."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from nats.aio.client import Client as NATS
from nats.js.errors import NoKeysError
from nats.js.kv import KeyValue

from services.runtime.budgets.accounts import Day, Hold, day_key
from services.runtime.budgets.holds import PARKED
from services.runtime.bus.kvstore import key_for
from tests.support.budgets import bucket
from tests.support.fakes.brave import FakeBrave
from tests.support.fakes.openai_server import FakeOpenAI, Reply
from tests.support.gateway_client import api, wait_status
from tests.support.harness import System
from tests.support.scripts import research_plan, schema_of
from tests.support.systems import Systems
from tests.support.waits import wait_for

PLANNED = 18  # the planner's one call: 11 tokens in, 7 out


@pytest.fixture(scope="module")
def research_system(systems: Systems, fake_brave: FakeBrave) -> Iterator[System]:
    yield from systems.run(workers="RESEARCH", auth=True, brave=fake_brave)


async def holds_of(kv: KeyValue, principal: str, request_id: str) -> list[Hold | None]:
    """The request's hold in its principal's day and in each of the principal's sessions."""
    try:
        stored = await kv.keys()
    except NoKeysError:  # nothing held or counted yet
        return []
    mine = key_for(principal)
    keys = [k for k in stored if k == day_key(principal) or k.startswith(f"{mine}.session.")]
    found = []
    for key in sorted(keys, key=lambda k: ".session." in k):  # the day first
        entry = await kv.get(key)
        found.append(Day.model_validate_json(entry.value or b"").held.get(request_id))
    return found


async def test_a_parked_request_holds_only_what_it_spent_until_it_resumes(
    research_system: System, fake_llm: FakeOpenAI, nc: NATS
) -> None:
    planning = [threading.Event(), threading.Event()]  # each planner call waits for its own
    plans = iter(
        [
            research_plan("the tide tables", ["Which harbour?"]),
            research_plan("the tide tables at Brest"),
        ]
    )

    gates = iter(planning)

    def worker(body: dict[str, Any]) -> Reply | dict[str, Any]:
        if schema_of(body) == "ResearchPlan":
            return Reply(json.dumps(next(plans)), wait=next(gates))
        return {"answer_markdown": "High tide at 06:12 [1]", "confidence": "high", "citations": [1]}

    fake_llm.script("fake-worker", worker)
    kv = await bucket(nc, research_system)
    try:
        async with api(research_system.http_url, "ivan") as http:
            created = await http.post("/api/workflows", json={"text": "research the tide tables"})
            assert created.status_code == 201, created.text
            rid = created.json()["workflow_id"]

            async def held_while(step: str) -> bool:
                found = await holds_of(kv, "ivan", rid)
                return len(found) == 2 and all(h is not None and h.step == step for h in found)

            # The planner in flight: its step's allowance is held in the day and the session.
            await wait_for(lambda: held_while("task:1"))
            assert all(h is not None and h.tokens > 1000 for h in await holds_of(kv, "ivan", rid))
            planning[0].set()
            await wait_status(http, rid, "awaiting_clarification")
            # Parked: each hold is what the request used, nothing more.
            await wait_for(lambda: held_while(PARKED))
            for parked in await holds_of(kv, "ivan", rid):
                assert parked is not None and parked.tokens == PLANNED, parked

            resumed = await http.post(
                f"/api/workflows/{rid}/feedback", json={"responses": {"q1": "Brest"}}
            )
            assert resumed.status_code == 200, resumed.text
            # Resumed: its next step holds again before its planner is asked.
            await wait_for(lambda: held_while("task:2"))
            assert all(
                h is not None and h.tokens > 1000 + PLANNED for h in await holds_of(kv, "ivan", rid)
            )
            planning[1].set()
            done = await wait_status(http, rid, "completed", "partial", "failed")
    finally:
        for gate in planning:
            gate.set()
    assert done["status"] == "completed", done
    assert await holds_of(kv, "ivan", rid) == [None, None]  # counted: no hold left
    day = Day.model_validate_json((await kv.get(day_key("ivan"))).value or b"")
    assert rid in day.counted and day.calls >= 3
