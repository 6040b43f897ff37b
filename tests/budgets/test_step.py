"""The budget seam, `Budget.step`, on a KV bucket in memory and on the real server: a step that
ends is counted once in its day and its session, its hold dropped; one that does not fit raises
`OverBudget` with the limit and holds nothing; one that raises (an error, a cancellation) counts
nothing and leaves its hold to its redelivery, which takes it over without a write; a parked
step holds what it used until its wait and wall time are over; a step handed on keeps its hold
and says what its worker may spend; `close` drops a hold and counts nothing; a followed reply
is counted as it stands when the step ends."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from contracts import Usage
from services.runtime.base.settings import Settings
from services.runtime.budgets import Ask, Budget, OverBudget
from services.runtime.budgets.accounts import Day, day_key, session_key
from services.runtime.budgets.holds import PARKED
from tests.support.budgets import Req


@dataclass
class Reply:
    usage: Usage = field(default_factory=Usage)


def budget(kv: Any, **limits: Any) -> Budget:
    settings = Settings(**{"budget_daily_tokens": 1000, "budget_session_tokens": 1000, **limits})
    return Budget(lambda: kv, settings)


def one_call(step: str = "decide", tokens: int = 100) -> Ask:
    return Ask(step, 0, 0.0, tokens, tokens, 0.0)


async def stored(kv: Any, key: str) -> tuple[Day, int]:
    entry = await kv.get(key)
    return Day.model_validate_json(entry.value or b""), entry.revision


async def accounts(kv: Any) -> list[Day]:
    """The day's and the session's records of pat."""
    return [(await stored(kv, key))[0] for key in (day_key("pat"), session_key("pat", "pat/s1"))]


async def test_a_step_that_ends_is_counted_once_in_its_day_and_session_and_drops_its_hold(
    kv: Any,
) -> None:
    spend = budget(kv)
    async with spend.step(Req("r1"), one_call()) as meter:
        assert meter.granted == 100
        assert [d.held["r1"].tokens for d in await accounts(kv)] == [100, 100]
        meter.add(Usage.of_call("m", 40, 30))
    for day in await accounts(kv):
        assert (day.input_tokens, day.output_tokens, day.counted, day.held) == (40, 30, ["r1"], {})
    async with spend.step(Req("r1"), one_call()) as meter:  # a redelivered end: counted already
        meter.add(Usage.of_call("m", 40, 30))
    assert [d.input_tokens + d.output_tokens for d in await accounts(kv)] == [70, 70]


async def test_a_step_that_does_not_fit_raises_the_limit_and_holds_nothing(kv: Any) -> None:
    spend = budget(kv, budget_session_tokens=150)
    async with spend.step(Req("r1"), one_call()) as meter:
        meter.hand_on()
    ran = False
    with pytest.raises(OverBudget) as refused:
        async with spend.step(Req("r2"), one_call()):
            ran = True
    assert not ran
    assert refused.value.limit.what == "session tokens"
    assert refused.value.limit.note() == (
        "Note: this request stopped at its session tokens budget (100 of 150 used or held, and "
        "its next model call could take 100 more)."
    )
    assert [list(d.held) for d in await accounts(kv)] == [["r1"], ["r1"]]
    # The request's own limit is checked first, before the bucket is written at all.
    with pytest.raises(OverBudget) as own:
        async with budget(kv, budget_request_tokens=50).step(Req("r3"), one_call()):
            ran = True
    assert not ran and own.value.limit.what == "tokens"
    assert [list(d.held) for d in await accounts(kv)] == [["r1"], ["r1"]]


async def test_a_step_that_raises_counts_nothing_and_its_redelivery_takes_the_hold_over(
    kv: Any,
) -> None:
    spend = budget(kv)
    with pytest.raises(RuntimeError):
        async with spend.step(Req("r1"), one_call("task:1")) as meter:
            meter.add(Usage.of_call("m", 40, 30))
            raise RuntimeError("the bus did not answer")
    started = asyncio.Event()

    async def stopped_at_shutdown() -> None:
        async with spend.step(Req("r1"), one_call("task:1")) as meter:
            meter.add(Usage.of_call("m", 40, 30))
            started.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(stopped_at_shutdown())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    day, revision = await stored(kv, day_key("pat"))
    assert day.counted == [] and day.held["r1"].tokens == 100 and day.held["r1"].step == "task:1"
    async with spend.step(Req("r1"), one_call("task:1")) as meter:  # the redelivery
        assert (await stored(kv, day_key("pat")))[1] == revision  # its hold, taken over
        meter.add(Usage.of_call("m", 20, 10))
    for day in await accounts(kv):
        assert (day.input_tokens + day.output_tokens, day.counted, day.held) == (30, ["r1"], {})


async def test_a_parked_step_holds_what_it_used_until_its_wait_and_wall_time_are_over(
    kv: Any,
) -> None:
    spend = budget(kv)
    used = Usage.of_call("m", 40, 30)
    async with spend.step(Req("r1"), Ask("task:1", 70, 0.0, 300, 100, 0.0), used=used) as meter:
        assert [d.held["r1"].tokens for d in await accounts(kv)] == [370, 370]
        await meter.park(60)
    until = time.time() + 60 + spend.settings.budget_request_seconds
    for day in await accounts(kv):
        hold = day.held["r1"]
        assert (hold.step, hold.tokens, day.counted) == (PARKED, 70, [])
        assert until - 30 < hold.until <= until


async def test_a_step_handed_on_keeps_its_hold_and_says_what_its_worker_may_spend(
    kv: Any,
) -> None:
    spend = budget(kv, budget_daily_tokens=400, budget_request_calls=10)
    used = Usage.of_call("m", 40, 30)
    ask = Ask("task:1", 70, 0.0, 500, 100, 0.0)
    async with spend.step(Req("r1"), ask, used=used) as meter:
        meter.hand_on()
        allowance = meter.allowance()
    assert (allowance.tokens, allowance.calls) == (330, 9)  # what the day had left, one call made
    for day in await accounts(kv):
        assert (day.held["r1"].tokens, day.counted) == (400, [])


async def test_close_drops_the_hold_of_a_part_and_counts_nothing(kv: Any) -> None:
    spend = budget(kv)
    async with spend.step(Req("r1"), one_call("frontline"), part="frontline") as meter:
        meter.hand_on()
    assert [list(d.held) for d in await accounts(kv)] == [["r1.frontline"], ["r1.frontline"]]
    await spend.close(Req("r1"), part="frontline")
    for day in await accounts(kv):
        assert (day.input_tokens + day.output_tokens, day.counted, day.held) == (
            0,
            ["r1.frontline"],
            {},
        )


async def test_a_followed_reply_is_counted_as_it_stands_when_the_step_ends(kv: Any) -> None:
    spend = budget(kv)
    reply = Reply()
    async with spend.step(Req("r1"), one_call("frontline"), part="frontline") as meter:
        meter.follow(reply)
        reply.usage = reply.usage + Usage.of_call("m", 10, 5)  # filled in as it streams
    for day in await accounts(kv):
        assert (day.input_tokens, day.output_tokens, day.counted) == (10, 5, ["r1.frontline"])
