"""A remembered copy of a KV value (`known`) only saves a read. A decision that writes nothing
(an event that changes nothing, a duplicate, a refused move) taken on a copy another process
has moved on since would drop the event for good, since no write fails and nothing reads
again: with two orchestrator replicas, a quarter of the requests hung that way (issue 25).
Each test below fails on the old helpers and passes when such a decision is taken again on a
fresh read (services/runtime/bus/kvstore.py). In memory and on the real server."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from contracts import ClarificationRequested, Question, RequestRecord, RequestState
from services.runtime.bus.kvstore import Versioned, get_model, mutate_versioned
from services.runtime.requests import lifecycle
from services.runtime.requests.lifecycle import Requests


class Loop(BaseModel):
    step: int = 0
    results: list[int] = []


def record(rid: str, state: RequestState) -> RequestRecord:
    return RequestRecord(
        request_id=rid, session_id="p/s", text="hi", state=state, status=lifecycle.STATUS[state]
    )


async def test_an_event_that_changes_nothing_on_a_stale_copy_is_folded_into_the_stored_one(
    kv: Any,
) -> None:
    mine = await mutate_versioned(kv, "loop", Loop, lambda cur: Loop(step=1))
    assert mine is not None
    # Another replica takes the next step; this process still remembers step 1.
    await mutate_versioned(kv, "loop", Loop, lambda cur: Loop(step=2))

    def on_result_of_step_2(cur: Loop | None) -> Loop | None:
        if cur is None or cur.step != 2:
            return None  # not for this step (a late duplicate): nothing to change
        return cur.model_copy(update={"results": [2]})

    done = await mutate_versioned(kv, "loop", Loop, on_result_of_step_2, known=mine)
    assert done is not None and done.value == Loop(step=2, results=[2])
    stored, _ = await get_model(kv, "loop", Loop)
    assert stored == Loop(step=2, results=[2]), "the result was dropped"


async def test_a_true_duplicate_still_writes_nothing(kv: Any) -> None:
    mine = await mutate_versioned(kv, "dup", Loop, lambda cur: Loop(step=1, results=[1]))
    assert mine is not None
    same = await mutate_versioned(kv, "dup", Loop, lambda cur: None, known=mine)
    assert same == mine
    _, revision = await get_model(kv, "dup", Loop)
    assert revision == mine.revision


async def test_a_move_refused_on_a_stale_copy_is_made_from_the_stored_record(kv: Any) -> None:
    orchestrator = Requests(kv, "orchestrator")
    made = await Requests(kv, "gateway").create(record("r1", "accepted"))
    assert made is not None
    stale = await orchestrator.move("r1", "routed")
    await orchestrator.move("r1", "working", detail="attempt 1")  # by another replica
    moved = await orchestrator.move("r1", "evaluating", known=stale, source="working")
    assert moved.value.state == "evaluating"
    now = await orchestrator.load("r1")
    assert now is not None and now.value.state == "evaluating"


async def test_a_second_clarification_is_recorded_though_the_copy_shows_the_first(
    kv: Any,
) -> None:
    orchestrator, gateway = Requests(kv, "orchestrator"), Requests(kv, "gateway")
    await kv.put("r2", record("r2", "working").model_dump_json().encode())

    def asking(n: int) -> ClarificationRequested:
        question = Question(id=f"q{n}", question=f"question {n}?")
        return ClarificationRequested(
            request_id="r2", session_id="p/s", source="evaluator", questions=[question]
        )

    parked, made = await orchestrator.settle(asking(1))
    assert made and parked.value.state == "awaiting_clarification"
    # The user answers (a gateway), another replica dispatches the next attempt.
    await gateway.move("r2", "decided", detail="answered")
    await orchestrator.move("r2", "working", detail="attempt 2")
    again, made = await orchestrator.settle(asking(2), known=parked)
    assert made, "the second question was taken for the first and dropped"
    assert [q.id for q in again.value.clarification_questions] == ["q2"]
    stored = await orchestrator.load("r2")
    assert stored is not None and stored.value.state == "awaiting_clarification"
    assert isinstance(stored, Versioned)
