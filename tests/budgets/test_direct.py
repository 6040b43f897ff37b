"""Budgets of direct answers (the frontline's one call, never reaching the orchestrator), on live
services with a 3,000-token day and 500-token answers: each direct answer is counted in its
principal's day and session exactly once, and in the spend counters; a spent day refuses the
next request at the gateway, and a day with less room than the call's maximum refuses it at the
frontline (`budget_exhausted`, naming the limit, no call made); eight direct requests racing
for the last of a day never spend past it; a frontline SIGKILLed while its call is held, then
restarted, counts the request once and settles its hold.

In the race every fake call reports its prompt as the frontline estimates it (about four
characters a token, services/runtime/budgets/asks.py) and its reply at its full
`max_tokens`, so each call uses exactly what it held: the case the hold scheme promises to keep
within the limit (holds.py)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import httpx
import pytest
from nats.aio.client import Client as NATS

from services.runtime.bus.kvstore import key_for
from tests.support.budgets import as_estimated, day_of, hello_race, session_of
from tests.support.fakes.openai_server import FakeOpenAI, Reply
from tests.support.gateway_client import AuthClient
from tests.support.harness import System
from tests.support.systems import Systems
from tests.support.waits import wait_for

DAY = 3000
ANSWER = 500  # max_tokens of an answer
RACERS = 8


@pytest.fixture(scope="module")
def direct(systems: Systems) -> Iterator[System]:
    yield from systems.run(
        workers="GENERAL",
        auth=True,
        SIDEKICK_BUDGET_DAILY_TOKENS=str(DAY),
        SIDEKICK_LLM_MAX_TOKENS_ANSWER=str(ANSWER),
        SIDEKICK_PRICES="fake-frontline=1:2",  # USD per million tokens in and out
    )


async def test_direct_answers_are_counted_in_the_day_and_the_session_once_each(
    direct: System, fake_llm: FakeOpenAI, nc: NATS
) -> None:
    ids = []
    async with AuthClient(direct.ws_url, "grace", events=True) as grace:
        for word in ("hello", "thanks", "good morning"):
            request_id = await grace.ack(word)
            done = await grace.until_end_of(request_id)
            assert done.end["metadata"]["route"] == "direct"
            # 11 tokens in at $1/M and 7 out at $2/M.
            assert done.end["metadata"]["cost_usd"] == 0.000025
            ids.append(request_id)
        session = await session_of(nc, direct, "grace", grace.uuid)
    assert len(fake_llm.chat_calls("fake-frontline")) == 3
    day = await day_of(nc, direct, "grace")
    for counted in (day, session):
        assert (counted.input_tokens, counted.output_tokens, counted.calls) == (33, 21, 3)
        assert counted.usd == 0.000075
        assert counted.counted == [f"{r}.frontline" for r in ids]
        assert counted.held == {}
    async with httpx.AsyncClient() as http:
        metrics = (await http.get(direct.metrics_url("frontline"))).text
    who = key_for("grace")[:12]
    assert (
        f'sidekick_spend_tokens_total{{direction="input",model="fake-frontline",principal="{who}"}}'
        " 33.0"
    ) in metrics


async def test_a_spent_day_refuses_the_next_direct_request_at_the_gateway(
    direct: System, fake_llm: FakeOpenAI
) -> None:
    # The answer reports a prompt longer than its hold (the case holds cannot prevent).
    fake_llm.usage_of = lambda body: (DAY, 7)
    async with AuthClient(direct.ws_url, "heidi", events=True) as heidi:
        first = await heidi.until_end_of(await heidi.ack("hello"))
        assert first.end["status"] == "completed"
        await heidi.send({"uuid": heidi.uuid, "message": "hello again"})
        refused = await heidi.frames_until(lambda f: "error" in f)
    assert refused[-1]["error"]["code"] == "rate_limited"
    assert refused[-1]["error"]["message"].startswith(
        "Today's budget for heidi is spent (daily tokens: 3007 of 3000); it resets at 00:00 UTC"
    )
    assert len(fake_llm.chat_calls("fake-frontline")) == 1


async def test_a_day_without_room_for_the_calls_maximum_refuses_it_at_the_frontline(
    direct: System, fake_llm: FakeOpenAI
) -> None:
    fake_llm.usage_of = lambda body: (2500, 7)
    async with AuthClient(direct.ws_url, "judy", events=True) as judy:
        first = await judy.until_end_of(await judy.ack("hello"))
        assert first.end["status"] == "completed"
        # 493 tokens are left: less than the call's maximum (its 500-token answer alone).
        second = await judy.until_end_of(await judy.ack("hello again"))
    assert second.end["status"] == "failed"
    error = second.only_error("budget_exhausted")
    assert error.startswith(
        "this request stopped at its daily tokens budget (2507 of 3000 used or held, and its "
        "next model call could take "
    ), error
    assert len(fake_llm.chat_calls("fake-frontline")) == 1  # the refused call was never made


async def test_direct_requests_racing_for_the_last_of_a_day_never_spend_past_it(
    direct: System, fake_llm: FakeOpenAI, nc: NATS
) -> None:
    race = await hello_race(direct, fake_llm, "oscar", RACERS, timeout=60)
    race.gate.set()
    refused = race.refused
    ended = await race.ended()
    completed = [c for c in ended if c.end["status"] == "completed"]
    calls = fake_llm.chat_calls("fake-frontline")
    used = [sum(as_estimated(body)) for body in calls]
    assert RACERS * min(used) > DAY  # checked only before its call, every one would have run

    day = await day_of(nc, direct, "oscar")
    spent = day.input_tokens + day.output_tokens
    assert spent <= DAY, (spent, used)
    assert (day.calls, spent) == (len(calls), sum(used))  # each call counted, once
    assert len(completed) == len(calls) == len(day.counted)
    assert day.held == {}
    assert completed and refused
    for refusal in refused:
        if refusal["code"] == "rate_limited":
            assert refusal["message"].startswith("Today's budget for oscar is spent"), refusal
        else:
            assert refusal["code"] == "budget_exhausted", refusal
            assert "stopped at its daily tokens budget" in refusal["message"], refusal


async def test_a_frontline_killed_mid_call_and_restarted_counts_the_request_once(
    direct: System, fake_llm: FakeOpenAI, nc: NATS
) -> None:
    gate = threading.Event()
    fake_llm.script("fake-frontline", lambda body: Reply("Hello from the harbour.", wait=gate))
    try:
        async with AuthClient(direct.ws_url, "ivan", events=True) as ivan:
            request_id = await ivan.ack("hello")
            await wait_for(lambda: len(fake_llm.chat_calls("fake-frontline")) == 1)
            # Its hold stands while the call is made: at least the answer's maximum.
            held = (await day_of(nc, direct, "ivan")).held
            assert held[f"{request_id}.frontline"].tokens > ANSWER
            direct.kill("frontline")
            gate.set()
            await asyncio.to_thread(direct.restart, "frontline")
            done = await ivan.until_end_of(request_id)
            session = await session_of(nc, direct, "ivan", ivan.uuid)
    finally:
        gate.set()
    assert done.end["status"] == "completed"
    assert done.text == "Hello from the harbour."
    # The killed call never reported its usage to anyone (it is the in-flight call the count
    # may lose); the call made on redelivery is counted, once.
    assert len(fake_llm.chat_calls("fake-frontline")) == 2
    for counted in (await day_of(nc, direct, "ivan"), session):
        assert (counted.input_tokens, counted.output_tokens, counted.calls) == (11, 7, 1)
        assert counted.counted == [f"{request_id}.frontline"]
        assert counted.held == {}
