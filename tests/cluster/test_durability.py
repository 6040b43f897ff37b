"""Clarification, cancel, the semantic cache, dedupe and dead letters, on the bus (the gateway's
side of these is tested in the gateway's own tests)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from nats.aio.client import Client as NATS

from contracts import ChatRequested, Subjects, new_id
from tests.support.fakes.openai_server import FakeOpenAI, Reply
from tests.support.harness import System
from tests.support.probe import Probe
from tests.support.results import succeeded
from tests.support.scripts import verdict
from tests.support.systems import Systems
from tests.support.waits import wait_for

SERVICES = ("frontline", "orchestrator", "evaluator", "workers")


@pytest.fixture(scope="module")
def bus_system(systems: Systems) -> Iterator[System]:
    yield from systems.run(services=SERVICES, SIDEKICK_CACHE_ENABLED="true")


@pytest.fixture
async def probe(nc: NATS, bus_system: System) -> AsyncIterator[Probe]:
    async with Probe(nc, bus_system.namespace) as probe:
        yield probe


def needs_input(question: str) -> dict[str, Any]:
    return verdict(
        False, 20, "I need to know the city.", user_input_needed=True, questions=[question]
    )


async def test_evaluator_asking_the_user_parks_and_answers_resume_the_same_request(
    probe: Probe, fake_llm: FakeOpenAI
) -> None:
    verdicts = iter([needs_input("Which city do you mean?"), verdict(True, 90, "good")])
    fake_llm.script("fake-evaluator", lambda body: next(verdicts))
    rid = await probe.ask("search the weather for my trip", session_id="anonymous/clar1")
    parked = await probe.wait_kind(rid, "request.clarification")
    assert parked["questions"] == [{"id": "q1", "question": "Which city do you mean?"}]
    assert parked["source"] == "evaluator"
    status = await probe.status(rid)
    assert status.status == "awaiting_clarification"
    assert [q.question for q in status.clarification_questions] == ["Which city do you mean?"]

    await probe.answer(rid, "anonymous/clar1", answers={"q1": "Lisbon"})
    done = await probe.wait_kind(rid, "request.completed")
    assert done["status"] == "completed"
    worker_calls = fake_llm.chat_calls("fake-worker")
    assert len(worker_calls) == 2
    assert "Q: Which city do you mean? A: Lisbon" in json.dumps(worker_calls[1]["messages"])
    # The evaluator is told the question was answered (no asking twice).
    judged = fake_llm.chat_calls("fake-evaluator")[1]
    assert "Lisbon" in json.dumps(judged["messages"])
    assert (await probe.status(rid)).clarification_questions == []


async def test_answers_to_a_request_that_is_not_parked_change_nothing(
    probe: Probe, fake_llm: FakeOpenAI
) -> None:
    rid = await probe.ask("search something plain", session_id="anonymous/clar2")
    await probe.wait_kind(rid, "request.completed")
    await probe.answer(rid, "anonymous/clar2", message="late answer")
    assert len(fake_llm.chat_calls("fake-worker")) == 1
    assert probe.kinds(rid).count("request.completed") == 1


async def test_cancel_during_a_model_stream_aborts_it_and_ends_cancelled(
    probe: Probe, fake_llm: FakeOpenAI
) -> None:
    words = " ".join(f"word{i}" for i in range(60))
    fake_llm.script(
        "fake-frontline",
        lambda body: (
            {"route_to_orchestrator": False, "reason": "chat"}
            if body.get("response_format")
            else Reply(words, chunk_delay=0.05)
        ),
    )
    rid = await probe.ask("hello, tell me a long story", session_id="anonymous/cancel1")
    await probe.wait_kind(rid, "stream.chunk")
    await probe.cancel(rid, "anonymous/cancel1")
    ended = await probe.wait_kind(rid, "request.cancelled", "request.completed")
    assert ended["kind"] == "request.cancelled"
    chunks = probe.kinds(rid).count("stream.chunk")
    assert 0 < chunks < 60, "the stream stopped early"
    assert (await probe.status(rid)).status == "cancelled"


async def test_cancel_between_attempts_runs_no_further_attempt(
    probe: Probe, fake_llm: FakeOpenAI
) -> None:
    hold = threading.Event()
    fake_llm.script(
        "fake-evaluator", lambda body: Reply(json.dumps(verdict(False, 10, "redo")), wait=hold)
    )
    rid = await probe.ask("search for a cancellable thing", session_id="anonymous/cancel2")
    await wait_for(lambda: bool(fake_llm.chat_calls("fake-evaluator")))
    await probe.cancel(rid, "anonymous/cancel2")
    ended = await probe.wait_kind(rid, "request.cancelled")
    hold.set()  # the failing verdict arrives after the cancel
    assert ended["reason"]
    status = await probe.status(rid)
    assert status.status == "cancelled"
    # The late verdict must not start attempt 2 (wait until the orchestrator consumed it).
    js = probe.js
    for _ in range(200):
        info = await js.consumer_info(
            probe.s.work_stream, f"{probe.s.namespace}_orchestrator_verdicts"
        )
        if info.num_pending == 0 and info.num_ack_pending == 0:
            break
        await asyncio.sleep(0.05)
    assert len(fake_llm.chat_calls("fake-worker")) == 1
    assert probe.kinds(rid).count("request.cancelled") == 1
    assert "request.completed" not in probe.kinds(rid)


async def test_the_semantic_cache_answers_a_repeat_at_once_unless_skipped_or_fresh(
    probe: Probe, fake_llm: FakeOpenAI
) -> None:
    text = "research the history of the printing press"
    first = await probe.ask(text)
    done = await probe.wait_kind(first, "request.completed")
    assert done["route"] == "orchestrated"
    assert len(fake_llm.chat_calls("fake-worker")) == 1

    again = await probe.ask(text)
    cached = await probe.wait_kind(again, "request.completed")
    assert cached["route"] == "cached" and cached["output"] == done["output"]
    assert len(fake_llm.chat_calls("fake-worker")) == 1, "no worker ran for the cached answer"
    assert (await probe.status(again)).cached is True

    skipped = await probe.ask(text, skip_cache=True)
    assert (await probe.wait_kind(skipped, "request.completed"))["route"] == "orchestrated"
    assert len(fake_llm.chat_calls("fake-worker")) == 2

    fresh_text = "research the latest news on the printing press"
    fresh1 = await probe.ask(fresh_text)
    await probe.wait_kind(fresh1, "request.completed")
    fresh2 = await probe.ask(fresh_text)
    assert (await probe.wait_kind(fresh2, "request.completed"))["route"] == "orchestrated"
    assert len(fake_llm.chat_calls("fake-worker")) == 4, "fresh requests bypass the cache"


async def test_the_semantic_cache_never_gives_one_principal_anothers_answer(
    probe: Probe, fake_llm: FakeOpenAI
) -> None:
    text = "research what my notes say about the printing press"
    first = await probe.ask(text, principal="alice", session_id="alice/" + new_id()[:8])
    alices = await probe.wait_kind(first, "request.completed")
    workers = len(fake_llm.chat_calls("fake-worker"))

    bobs = await probe.ask(text, principal="bob", session_id="bob/" + new_id()[:8])
    answer = await probe.wait_kind(bobs, "request.completed")
    assert answer["route"] == "orchestrated", "bob was answered from alice's cached answer"
    assert len(fake_llm.chat_calls("fake-worker")) == workers + 1

    again = await probe.ask(text, principal="alice", session_id="alice/" + new_id()[:8])
    cached = await probe.wait_kind(again, "request.completed")
    assert cached["route"] == "cached" and cached["output"] == alices["output"]


async def test_a_duplicate_publish_is_deduplicated(probe: Probe, fake_llm: FakeOpenAI) -> None:
    event = ChatRequested(request_id="dup-1", session_id="anonymous/dup", message="hello")
    await probe.accept(event)
    assert await probe.publish(event, probe.s.chat_requested, "dup-1:requested") is True
    assert await probe.publish(event, probe.s.chat_requested, "dup-1:requested") is False
    await probe.wait_kind("dup-1", "request.completed")
    assert len(fake_llm.chat_calls("fake-frontline")) == 1, "one model call, one answer"


async def test_a_poison_message_ends_in_the_dead_letter_stream(probe: Probe, nc: NATS) -> None:
    js = nc.jetstream()
    s: Subjects = probe.s
    before = (await js.stream_info(s.deadletter_stream)).state.last_seq
    await js.publish(
        s.chat_requested,
        b'{"kind": "chat.requested", "oops": true}',
        headers={"Nats-Msg-Id": "poison-1"},
    )
    for _ in range(200):
        info = await js.stream_info(s.deadletter_stream)
        if info.state.last_seq > before:
            break
        await asyncio.sleep(0.05)
    msg = await js.get_msg(s.deadletter_stream, info.state.last_seq)
    record = json.loads(msg.data or b"")
    assert record["source"] == "frontline"
    assert record["reason"].startswith("invalid")
    assert '"oops"' in record["body"]
    assert msg.subject == s.deadletter("frontline")


@pytest.fixture(scope="module")
def impatient_system(systems: Systems) -> Iterator[System]:
    yield from systems.run(
        services=SERVICES, SIDEKICK_CLARIFICATION_TIMEOUT="1", SIDEKICK_MAX_DELIVER="2"
    )


async def test_a_parked_request_times_out_with_a_clear_status(
    impatient_system: System, nc: NATS, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script("fake-evaluator", lambda body: needs_input("Which year?"))
    probe = await Probe(nc, impatient_system.namespace).start()
    try:
        rid = await probe.ask("search the winner", session_id="anonymous/late")
        await probe.wait_kind(rid, "request.clarification")
        failed = await probe.wait_kind(rid, "request.failed")
    finally:
        await probe.stop()
    assert failed["code"] == "clarification_timeout"
    assert "No answer" in failed["error"]
    assert (await probe.status(rid)).status == "failed"


async def test_a_message_that_keeps_failing_is_dead_lettered_and_its_request_fails(
    impatient_system: System, nc: NATS
) -> None:
    probe = await Probe(nc, impatient_system.namespace).start()
    s = probe.s
    try:
        # A worker result for a request the orchestrator has no state for can never be applied.
        orphan = succeeded("orphan-1", "anonymous/orphan", "GENERAL", "x")
        await probe.publish(orphan, s.worker_completed, "orphan-1:result:1")
        failed = await probe.wait_kind("orphan-1", "request.failed")
    finally:
        await probe.stop()
    assert failed["code"] == "delivery_exhausted"
    info = await probe.js.stream_info(s.deadletter_stream)
    records = [
        json.loads((await probe.js.get_msg(s.deadletter_stream, seq)).data or b"{}")
        for seq in range(info.state.first_seq, info.state.last_seq + 1)
    ]
    (record,) = [r for r in records if "orphan-1" in r.get("body", "")]
    assert record["source"] == "orchestrator" and record["reason"].startswith("exhausted")
