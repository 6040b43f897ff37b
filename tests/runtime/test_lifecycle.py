"""A request's life: the table of legal moves, walked whole against the compare-and-set
function every service uses (in memory and on the real server), and the state diagram in
docs/architecture.md generated from it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from contracts import (
    TERMINAL_STATES,
    ClarificationRequested,
    Question,
    RequestCompleted,
    RequestRecord,
    RequestState,
)
from services.runtime.bus.natsauth import SERVICES
from services.runtime.requests import lifecycle
from services.runtime.requests.lifecycle import ACTORS, LEGAL, STATES, TABLE, IllegalMove, Requests

ROOT = Path(__file__).resolve().parents[2]


def record(rid: str, state: RequestState) -> RequestRecord:
    return RequestRecord(
        request_id=rid, session_id="p/s", text="hi", state=state, status=lifecycle.STATUS[state]
    )


async def place(kv: Any, rid: str, state: RequestState) -> None:
    """Arrange a request in `state` (the test sets the scene; services only move)."""
    await kv.put(rid, record(rid, state).model_dump_json().encode())


async def test_every_legal_move_is_made_and_every_other_is_refused(kv: Any) -> None:
    wrong: list[str] = []
    n = 0
    for source in (None, *STATES):
        for target in STATES:
            for actor in ACTORS:
                n += 1
                rid = f"r{n}"
                requests = Requests(kv, actor)
                legal = (source, target) in LEGAL and actor in LEGAL[(source, target)]
                try:
                    if source is None:
                        made = await requests.create(record(rid, target))
                        assert made is not None
                    else:
                        await place(kv, rid, source)
                        made = await requests.move(rid, target, detail=f"by {actor}")
                    moved = True
                except IllegalMove:
                    moved = False
                stored = await requests.load(rid)
                now = stored.value.state if stored else None
                if moved != legal or now != (target if legal else source):
                    wrong.append(f"{source} -> {target} by {actor}: moved={moved}, now {now}")
    assert not wrong, "\n".join(wrong)
    assert n == (len(STATES) + 1) * len(STATES) * len(ACTORS)


async def test_of_two_racing_moves_from_one_revision_exactly_one_wins(kv: Any) -> None:
    await place(kv, "race", "awaiting_clarification")
    gateways = [Requests(kv, "gateway") for _ in range(10)]
    seen = await gateways[0].load("race")
    assert seen is not None

    async def answer(requests: Requests, n: int) -> bool:
        try:
            await requests.move("race", "decided", known=seen, detail=f"answer {n}")
        except IllegalMove:
            return False
        return True

    won = await asyncio.gather(*(answer(g, n) for n, g in enumerate(gateways)))
    assert sum(won) == 1
    final = await gateways[0].load("race")
    assert final is not None and final.value.state == "decided"
    assert final.value.detail == f"answer {won.index(True)}"


async def test_of_ten_identical_answers_from_awaiting_clarification_exactly_one_moves(
    kv: Any,
) -> None:
    # The same change from every answer: without `source`, a loser that re-reads finds the
    # request already where it wanted it, nothing to change, and would count as accepted.
    await place(kv, "same", "awaiting_clarification")
    gateways = [Requests(kv, "gateway") for _ in range(10)]

    async def answer(requests: Requests) -> bool:
        try:
            await requests.move(
                "same", "decided", source="awaiting_clarification", clarification_questions=[]
            )
        except IllegalMove:
            return False
        return True

    assert sum(await asyncio.gather(*(answer(g) for g in gateways))) == 1


async def test_the_first_end_stands_and_later_ones_get_it_back(kv: Any) -> None:
    await place(kv, "end", "direct")
    front, orch = Requests(kv, "frontline"), Requests(kv, "orchestrator")
    done = RequestCompleted(
        request_id="end", session_id="p/s", status="completed", output="hi", route="direct"
    )
    first = await front.end(done)
    assert first.value.state == "completed" and first.value.final_output == "hi"
    late = RequestCompleted(
        request_id="end", session_id="p/s", status="completed", output="other", route="direct"
    )
    again = await orch.end(late)
    assert again.value.outcome == done and again.revision == first.revision


async def test_a_push_mark_is_seen_by_a_writer_it_beat_and_never_lands_on_an_end(
    kv: Any,
) -> None:
    """The gateway marks a task for push notifications by compare-and-set: a producer that read
    the record before the mark loses its write, reads again and ends it marked (so it pushes the
    end); a record that ended first is returned unmarked (so the gateway pushes the end)."""
    await place(kv, "mark", "working")
    orch, gateway = Requests(kv, "orchestrator"), Requests(kv, "gateway")
    stale = await orch.load("mark")
    assert stale is not None and not stale.value.push
    marked = await gateway.notify("mark")
    assert marked is not None and marked.value.push and marked.value.state == "working"
    done = RequestCompleted(
        request_id="mark", session_id="p/s", status="completed", output="hi", route="direct"
    )
    ended, made = await orch.settle(done, known=stale)
    assert made and ended.value.state == "completed" and ended.value.push
    assert (await gateway.notify("mark")) == ended  # marked already: nothing written
    await place(kv, "late", "completed")
    before = await gateway.load("late")
    late = await gateway.notify("late")
    assert before is not None and late == before and not late.value.push
    assert await gateway.notify("nobody") is None


async def test_parking_keeps_its_questions_and_an_answer_clears_them(kv: Any) -> None:
    await place(kv, "park", "evaluating")
    asked = ClarificationRequested(
        request_id="park",
        session_id="p/s",
        questions=[Question(id="q1", question="Which city?")],
        source="evaluator",
    )
    parked = await Requests(kv, "orchestrator").end(asked)
    assert parked.value.status == "awaiting_clarification"
    assert [q.question for q in parked.value.clarification_questions] == ["Which city?"]
    answered = await Requests(kv, "gateway").move("park", "decided", clarification_questions=[])
    assert answered.value.clarification_questions == [] and answered.value.status == "planning"
    with pytest.raises(IllegalMove):  # a second answer finds it no longer waiting
        await Requests(kv, "gateway").move("park", "decided", detail="late")


@pytest.mark.fast
def test_the_table_reaches_every_state_and_every_life_can_end() -> None:
    reachable: set[RequestState] = set()
    frontier = [m.target for m in TABLE if m.source is None]
    while frontier:
        state = frontier.pop()
        if state not in reachable:
            reachable.add(state)
            frontier += [m.target for m in TABLE if m.source == state]
    assert reachable == set(STATES)
    for state in STATES:
        moves = {m.target for m in TABLE if m.source == state}
        if state in TERMINAL_STATES:
            assert not moves, f"{state} is terminal but has moves {moves}"
        else:
            assert moves & TERMINAL_STATES, f"{state} cannot end"
    assert len(LEGAL) == len(TABLE), "one row per (source, target)"
    assert set(ACTORS) <= set(SERVICES), "actors are services"
    assert set(lifecycle.STATUS) == set(STATES)


@pytest.mark.fast
def test_the_state_diagram_in_the_docs_is_generated_from_the_table() -> None:
    doc = (ROOT / lifecycle.DOC).read_text(encoding="utf-8")
    assert lifecycle.rendered(doc) == doc, (
        "docs/architecture.md's diagram is out of date: "
        "run python -m services.runtime.requests.lifecycle"
    )
    for move in TABLE:
        source = "[*]" if move.source is None else move.source
        assert f"{source} --> {move.target}: {', '.join(move.by)}" in doc
