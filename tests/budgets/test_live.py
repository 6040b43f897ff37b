"""Budgets on live services (every fake model call reports 11 tokens in and 7 out unless a test
says otherwise): a request whose model-call budget runs out after attempt 1 of 3 ends partial
with its best answer and a note naming the limit, and never makes the next call; a worker that
used more than its step held spends the day, its evaluation is not held (partial, naming the
daily limit), and the principal is then refused at the gateway on the WebSocket, the workflows
API and /v1, with the day's exact count (the frontline's routing call included: it is counted at
the handoff); after a SIGKILL mid-request the day counts it once and its hold is settled."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from nats.aio.client import Client as NATS

from contracts import Subjects
from tests.support.budgets import day_of, judging
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.gateway_client import AuthClient, api
from tests.support.harness import System
from tests.support.scripts import verdict
from tests.support.systems import Systems
from tests.support.waits import wait_for


@pytest.fixture(scope="module")
def three_calls(systems: Systems) -> Iterator[System]:
    yield from systems.run(workers="GENERAL", auth=True, SIDEKICK_BUDGET_REQUEST_CALLS="3")


@pytest.fixture(scope="module")
def small_day(systems: Systems) -> Iterator[System]:
    yield from systems.run(
        workers="GENERAL",
        auth=True,
        SIDEKICK_BUDGET_DAILY_TOKENS="10000",
        SIDEKICK_PRICES="fake-worker=1:2",  # USD per million tokens in and out
    )


async def test_a_budget_that_runs_out_after_attempt_1_of_3_ends_partial_naming_the_limit(
    three_calls: System, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script("fake-evaluator", lambda body: verdict(False, 40, "Add the dates."))
    async with AuthClient(three_calls.ws_url, "alice") as alice:
        await alice.send({"uuid": alice.uuid, "message": "search for the dates", "events": True})
        convo = await alice.until_end()
    # One decision, attempt 1, its verdict: the budget of three model calls is spent, so
    # attempt 2 is never dispatched.
    assert len(fake_llm.chat_calls("fake-worker")) == 1
    assert len(fake_llm.chat_calls("fake-evaluator")) == 1
    assert convo.text.endswith("Note: this request stopped at its model calls budget (3 of 3)."), (
        convo.text
    )


async def test_a_principal_whose_day_is_spent_is_refused_on_every_surface(
    small_day: System, fake_llm: FakeOpenAI
) -> None:
    # The worker's reply reports a prompt far longer than its hold (the case holds cannot
    # prevent): 10,000 tokens in, so the day is spent by the time the evaluation would be held.
    fake_llm.usage_of = lambda body: (10_000, 7) if body["model"] == "fake-worker" else (11, 7)
    async with AuthClient(small_day.ws_url, "bob", events=True) as bob:
        request_id = await bob.ack("search the tides")
        first = await bob.until_end_of(request_id)
        assert first.end["status"] == "partial"  # the worker's answer, never evaluated
        # The day: the frontline's routing call (18), the decision (18), the worker (10,007).
        assert "Note: this request stopped at its daily tokens budget (10043 of 10000" in (
            first.text
        )
        assert not fake_llm.chat_calls("fake-evaluator")
        # The end shows the whole request: the routing call, the decision and the worker.
        assert first.end["metadata"]["usage"]["input_tokens"] == 10_022
        # Priced: only the worker's model has a price here, 10,000 in at $1/M and 7 out at $2/M.
        assert first.end["metadata"]["cost_usd"] == 0.010014
        await bob.send({"uuid": bob.uuid, "message": "search the moon"})
        refused = await bob.frames_until(lambda f: "error" in f)
    said = "Today's budget for bob is spent (daily tokens: 10043 of 10000); it resets at 00:00 UTC"
    assert refused[-1]["error"]["code"] == "rate_limited"
    assert said in refused[-1]["error"]["message"]
    async with api(small_day.http_url, "bob") as http:
        workflow = await http.post("/api/workflows", json={"text": "search the sun"})
        v1 = await http.post(
            "/v1/chat/completions",
            json={"model": "sidekick", "messages": [{"role": "user", "content": "hello"}]},
        )
    assert workflow.status_code == 429 and said in workflow.json()["error"]["message"]
    assert v1.status_code == 429 and said in v1.text
    async with api(small_day.http_url, "carol") as http:  # another principal's day is its own
        other = await http.post("/api/workflows", json={"text": "search the tides"})
        assert other.status_code == 201, other.text


async def test_the_days_count_after_a_sigkill_mid_request_and_a_redelivered_verdict_is_exact(
    three_calls: System, fake_llm: FakeOpenAI, nc: NATS
) -> None:
    judged = judging(three_calls, fake_llm, "erin", "search the tides")
    async with judged as (erin, request_id, hold):
        three_calls.kill("orchestrator")  # while the verdict is being made
        # Its hold stands meanwhile: what it used, and at least the verdict's maximum.
        assert (await day_of(nc, three_calls, "erin")).held[request_id].tokens > 36
        hold.set()
        await asyncio.to_thread(three_calls.restart, "orchestrator")
        done = await erin.until_end_of(request_id)
    assert done.end["status"] == "completed"
    counted = await day_of(nc, three_calls, "erin")
    # The frontline's routing call (counted at the handoff), decision, attempt, verdict: four
    # calls of 11 + 7 tokens, each counted once.
    assert (counted.input_tokens, counted.output_tokens, counted.calls) == (44, 28, 4)
    assert counted.counted == [f"{request_id}.frontline", request_id]
    assert counted.held == {}  # the killed step's hold settled when the request was counted

    # The verdict delivered again, as a redelivery would, under another message id.
    s = Subjects(three_calls.namespace)
    js = nc.jetstream()
    stored = await js.get_last_msg(s.work_stream, s.evaluation_completed)
    ack = await js.publish(
        s.evaluation_completed,
        stored.data or b"",
        stream=s.work_stream,
        headers={"Nats-Msg-Id": f"{request_id}:verdict-again"},
    )

    async def handled() -> bool:
        info = await js.consumer_info(
            s.work_stream, f"{three_calls.namespace}_orchestrator_verdicts"
        )
        return bool(info.ack_floor and (info.ack_floor.stream_seq or 0) >= ack.seq)

    await wait_for(handled)
    assert await day_of(nc, three_calls, "erin") == counted
