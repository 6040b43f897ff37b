"""Spend that must be counted however a call ends, and days that must hold however requests race,
tried through the real doors (the gateway's WebSocket and `/v1`, live services, a real
nats-server; the model is the fake one):

- send-and-cancel in a loop: each model call cancelled mid-stream is counted in the day, from
  what was sent and what came back (estimated, marked so), none of them as nothing;
- a `/v1` stream the client drops after its first chunk: its call is counted the same way;
- a verdict that comes after its request was cancelled: its call is counted, once;
- a worker's model call that timed out: counted at its prompt (the server read it);
- eight concurrent requests of 16,000 CJK characters each (about one token a character, as real
  tokenizers count them) racing for a 60,000-token day never pass it: each call is held at no
  less than it uses, so the holds, not the estimate, decide which run;
- a count made while the `budgets` bucket takes no writes (what a node kill does to it for a
  while) lands once it takes them again, once;
- many concurrent requests of ONE principal across two frontline replicas (each leasing its
  slice of the day) never pass the day, each call counted once;
- a frontline SIGKILLed while it holds a lease: its slice returns after
  SIDEKICK_BUDGET_LEASE_SECONDS (3 s here), and the next write drops it."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from nats.aio.client import Client as NATS
from nats.js.api import StreamConfig

from contracts import Subjects
from services.runtime.budgets.accounts import Day, day_key
from services.runtime.budgets.asks import prompt_estimate
from services.runtime.budgets.leases import LEASE
from tests.support.budgets import as_estimated, bucket, ended_or_refused, hello_race, judging
from tests.support.fakes.openai_server import FakeOpenAI, Reply
from tests.support.gateway_client import AuthClient, api
from tests.support.harness import Conversation, System
from tests.support.systems import Systems
from tests.support.waits import wait_for

pytestmark = pytest.mark.timeout(600)

DAY = 60_000
ANSWER = 500  # max_tokens of an answer
LONG = " ".join(f"word{n}" for n in range(400))  # streamed a word at a time, slowly
CJK = "漢字仮名交じり文" * 2000  # 16,000 characters, about a token each


# Every system here: tokens required, the GENERAL worker, a day of DAY tokens, answers of at
# most ANSWER, leases of 3 s whose counts land every 0.3 s, and no request limits.
SPENDING = {
    "SIDEKICK_BUDGET_DAILY_TOKENS": str(DAY),
    "SIDEKICK_LLM_MAX_TOKENS_ANSWER": str(ANSWER),
    "SIDEKICK_BUDGET_LEASE_SECONDS": "3",
    "SIDEKICK_BUDGET_FLUSH_SECONDS": "0.3",
    "SIDEKICK_RATE_LIMIT_PER_MINUTE": "0",
    "SIDEKICK_MAX_CONCURRENT_REQUESTS": "0",
}


def spend_system(systems: Systems, **options: Any) -> Iterator[System]:
    return systems.run(workers="GENERAL", auth=True, variables=SPENDING, **options)


@pytest.fixture(scope="module")
def spending(systems: Systems) -> Iterator[System]:
    yield from spend_system(systems)


async def day_of(nc: NATS, system: System, principal: str) -> Day:
    kv = await bucket(nc, system)
    try:
        entry = await kv.get(day_key(principal))
    except Exception:  # nothing held or counted yet
        return Day()
    return Day.model_validate_json(entry.value or b"")


async def counted_calls(nc: NATS, system: System, principal: str, calls: int) -> Day:
    """The day once it counts `calls` calls (a busy principal's counts land in batches)."""
    found: list[Day] = []

    async def landed() -> bool:
        found[:] = [await day_of(nc, system, principal)]
        return found[0].calls >= calls

    try:
        await wait_for(landed, timeout=30)
    except TimeoutError:
        raise AssertionError(f"{principal}'s day never counted {calls} calls: {found}") from None
    return found[0]


def prompt_of(body: dict[str, Any]) -> int:
    """The messages of a call, estimated (its tool definitions left out)."""
    return prompt_estimate(body["messages"])


async def test_send_and_cancel_in_a_loop_is_counted_every_time(
    spending: System, fake_llm: FakeOpenAI, nc: NATS
) -> None:
    fake_llm.script("fake-frontline", lambda body: Reply(LONG, chunk_delay=0.05))
    loops = 6
    async with AuthClient(spending.ws_url, "quinn", events=True) as quinn:
        ids = []
        for n in range(loops):
            rid = await quinn.ack(f"tell me a long story, number {n}")
            await quinn.frames_until(lambda f: "on_chat_model_stream" in f)  # mid-answer
            await quinn.send({"cancel": rid})
            done = await quinn.until_end_of(rid)
            assert done.end["status"] == "cancelled", done.frames
            ids.append(rid)
    calls = fake_llm.chat_calls("fake-frontline")
    assert len(calls) == loops
    day = await counted_calls(nc, spending, "quinn", loops)
    assert day.calls == loops
    assert sorted(day.counted) == sorted(f"{rid}.frontline" for rid in ids)
    # Each call's prompt as sent, and at least a token of what came back before the cancel.
    assert day.input_tokens >= sum(prompt_of(body) for body in calls)
    assert day.output_tokens >= loops
    assert day.held == {} or all(h.step == LEASE for h in day.held.values())


async def test_a_v1_stream_dropped_after_its_first_chunk_is_counted(
    spending: System, fake_llm: FakeOpenAI, nc: NATS
) -> None:
    fake_llm.script("fake-frontline", lambda body: Reply(LONG, chunk_delay=0.05))
    body = {
        "model": "sidekick",
        "stream": True,
        "messages": [{"role": "user", "content": "tell me a long story"}],
    }
    async with (
        api(spending.http_url, "rupert") as http,
        http.stream("POST", "/v1/chat/completions", json=body) as streamed,
    ):
        assert streamed.status_code == 200
        async for line in streamed.aiter_lines():
            if '"content":"word' in line:
                break  # the first chunk of the answer: the client goes away
    calls = fake_llm.chat_calls("fake-frontline")
    assert len(calls) == 1
    day = await counted_calls(nc, spending, "rupert", 1)
    assert day.calls == 1 and len(day.counted) == 1
    assert day.input_tokens >= prompt_of(calls[0]) and day.output_tokens >= 1


async def test_dense_text_racing_for_a_day_never_passes_it(
    spending: System, fake_llm: FakeOpenAI, nc: NATS
) -> None:
    gate = threading.Event()  # every call waits, so that all eight race while holds stand
    fake_llm.script("fake-frontline", lambda body: Reply("好的。", wait=gate))

    def tokenized(body: dict[str, Any]) -> tuple[int, int]:
        """What a real tokenizer counts: about one token a CJK character, four characters a
        token of English; the answer at its full max_tokens."""
        text = "".join(str(m.get("content") or "") for m in body["messages"])
        wide = sum(1 for ch in text if ord(ch) > 127)
        return wide + (len(text) - wide) // 4, int(body["max_tokens"])

    fake_llm.usage_of = tokenized
    refused: list[dict[str, Any]] = []

    async def one() -> Conversation | None:
        async with AuthClient(spending.ws_url, "sybil", events=True) as sybil:
            frame = {"uuid": sybil.uuid, "message": CJK}  # 48 KB as UTF-8, not \u-escaped
            await sybil.send(json.dumps(frame, ensure_ascii=False))
            return await ended_or_refused(sybil, refused)

    racing = asyncio.gather(*(one() for _ in range(8)))
    try:
        await wait_for(
            lambda: len(fake_llm.chat_calls("fake-frontline")) + len(refused) == 8, timeout=90
        )
    finally:
        gate.set()
    await racing
    calls = fake_llm.chat_calls("fake-frontline")
    used = [sum(tokenized(body)) for body in calls]
    assert calls, refused
    assert 8 * min(used) > DAY  # all eight together would pass the day
    day = await counted_calls(nc, spending, "sybil", len(calls))
    spent = day.input_tokens + day.output_tokens
    assert (day.calls, spent) == (len(calls), sum(used))  # each call counted, once
    assert spent <= DAY, (spent, used)
    assert refused and all(
        r["code"] in ("budget_exhausted", "rate_limited") and "budget" in r["message"]
        for r in refused
    ), refused


async def test_a_verdict_that_comes_after_its_request_was_cancelled_is_counted(
    spending: System, fake_llm: FakeOpenAI, nc: NATS
) -> None:
    async with judging(spending, fake_llm, "vera", "search for the tides") as (vera, rid, hold):
        await vera.send({"cancel": rid})  # while the verdict is being made
        done = await vera.until_end_of(rid)
        assert done.end["status"] == "cancelled", done.frames
        counted = await counted_calls(nc, spending, "vera", 3)  # routing, decision, worker
        assert sorted(counted.counted) == sorted([f"{rid}.frontline", rid])
        hold.set()  # the verdict comes after all: its call is the request's spend too
        day = await counted_calls(nc, spending, "vera", 4)
    assert day.counted.count(f"{rid}.late.evaluate1") == 1
    assert (day.input_tokens, day.output_tokens, day.calls) == (44, 28, 4)


async def set_writes(nc: NATS, system: System, allowed: bool) -> None:
    """Let the `budgets` bucket take writes, or refuse every one (a message too large for it),
    as its stream does while its leader is lost; reads go on."""
    js = nc.jetstream()
    stream = f"KV_{Subjects(system.namespace).bucket('budgets')}"
    config: StreamConfig = (await js.stream_info(stream)).config
    config.max_msg_size = -1 if allowed else 16
    await js.update_stream(config)


async def test_a_count_made_while_the_bucket_takes_no_writes_lands_later(
    spending: System, fake_llm: FakeOpenAI, nc: NATS
) -> None:
    gate = threading.Event()
    fake_llm.script("fake-frontline", lambda body: Reply("Hello from the harbour.", wait=gate))
    offset = len(spending.log("frontline"))
    try:
        async with AuthClient(spending.ws_url, "uma", events=True) as uma:
            rid = await uma.ack("hello")
            await wait_for(lambda: len(fake_llm.chat_calls("fake-frontline")) == 1)
            assert f"{rid}.frontline" in (await day_of(nc, spending, "uma")).held
            await set_writes(nc, spending, allowed=False)
            gate.set()  # the answer comes; its count finds the bucket refusing writes
            done = await uma.until_end_of(rid)
        assert done.end["status"] == "completed"
        holder = f"{rid}.frontline"
        warned = f"could not count the spend of {holder}"
        await wait_for(lambda: warned in spending.log("frontline")[offset:])
        assert (await day_of(nc, spending, "uma")).counted == []
        await asyncio.sleep(1.0)  # tried again meanwhile
    finally:
        gate.set()
        await set_writes(nc, spending, allowed=True)
    day = await counted_calls(nc, spending, "uma", 1)
    assert (day.input_tokens, day.output_tokens, day.calls) == (11, 7, 1)
    assert day.counted == [holder] and day.held == {}
    await asyncio.sleep(1.0)  # and it is not counted twice
    assert await day_of(nc, spending, "uma") == day


async def test_a_frontline_killed_while_it_holds_a_lease_returns_its_slice_after_its_time(
    spending: System, fake_llm: FakeOpenAI, nc: NATS
) -> None:
    gate = threading.Event()
    fake_llm.script(
        "fake-frontline",
        lambda body: Reply("Hi.", wait=gate if "last" in str(body["messages"][-1]) else None),
    )
    try:
        async with AuthClient(spending.ws_url, "alan", events=True) as alan:
            for n in range(5):  # busy: its frontline leases its day
                done = await alan.until_end_of(await alan.ack(f"hello {n}"))
                assert done.end["status"] == "completed"
            rid = await alan.ack("hello, the last one")
            await wait_for(lambda: len(fake_llm.chat_calls("fake-frontline")) == 6)
            await asyncio.sleep(0.6)  # the counts of the five written
            day = await day_of(nc, spending, "alan")
            lease = {name: h for name, h in day.held.items() if h.step == LEASE}
            assert len(lease) == 1 and next(iter(lease)).startswith("lease.frontline."), day.held
            name, held = next(iter(lease.items()))
            spending.kill("frontline")  # mid-call, its hold in its lease
            counted = day.input_tokens + day.output_tokens
            assert day.calls == 5
            assert (await day_of(nc, spending, "alan")).committed(time.time())[0] == (
                counted + held.tokens
            )
            assert held.until <= time.time() + 3.5
            await asyncio.sleep(max(held.until - time.time(), 0) + 0.5)
            after = await day_of(nc, spending, "alan")
            assert after.committed(time.time())[0] == counted  # the slice is the day's again
            gate.set()
            await asyncio.to_thread(spending.restart, "frontline")
            done = await alan.until_end_of(rid)  # the redelivered request, answered
        assert done.end["status"] == "completed"
    finally:
        gate.set()
    day = await counted_calls(nc, spending, "alan", 6)
    assert name not in day.held  # dropped by the restarted frontline's write
    assert day.counted.count(f"{rid}.frontline") == 1


@pytest.fixture(scope="module")
def impatient(systems: Systems) -> Iterator[System]:
    yield from spend_system(systems, SIDEKICK_LLM_TIMEOUT="1", SIDEKICK_LLM_MAX_RETRIES="0")


async def test_a_workers_call_that_timed_out_is_counted_at_its_prompt(
    impatient: System, fake_llm: FakeOpenAI, nc: NATS
) -> None:
    fake_llm.script("fake-worker", lambda body: Reply("Too late.", delay=3))
    async with AuthClient(impatient.ws_url, "wade", events=True) as wade:
        done = await wade.until_end_of(await wade.ack("search for the tides"))
    assert done.end["status"] == "failed", done.frames
    assert "no answer within 1s" in done.only_error("worker_failed")
    (asked,) = fake_llm.chat_calls("fake-worker")
    day = await counted_calls(nc, impatient, "wade", 3)  # routing, decision, the worker's
    assert day.calls == 3
    # The routing call and the decision as reported (11 + 7 each), the worker's at its prompt.
    assert day.input_tokens >= 22 + prompt_of(asked) and day.output_tokens == 14


RACERS = 64


@pytest.fixture(scope="module")
def replicated(systems: Systems) -> Iterator[System]:
    yield from spend_system(systems, replicas=2, SIDEKICK_BUDGET_DAILY_TOKENS="40000")


async def test_one_principal_racing_across_replicas_never_passes_its_day(
    replicated: System, fake_llm: FakeOpenAI, nc: NATS
) -> None:
    race = await hello_race(replicated, fake_llm, "oscar", RACERS, timeout=120)
    try:
        held = await day_of(nc, replicated, "oscar")
    finally:
        race.gate.set()
    refused = race.refused
    ended = await race.ended()
    calls = fake_llm.chat_calls("fake-frontline")
    used = [sum(as_estimated(body)) for body in calls]
    assert RACERS * min(used) > 40_000  # together they would pass the day
    # While they were held, a frontline held its share as a lease.
    assert any(h.step == LEASE for h in held.held.values()), held.held
    day = await counted_calls(nc, replicated, "oscar", len(calls))
    spent = day.input_tokens + day.output_tokens
    assert spent <= 40_000, (spent, used)
    assert (day.calls, spent) == (len(calls), sum(used))  # each call counted, once
    assert sorted(day.counted) == sorted(set(day.counted)) and len(day.counted) == len(calls)
    completed = [c for c in ended if c.end["status"] == "completed"]
    assert len(completed) == len(calls) and refused
