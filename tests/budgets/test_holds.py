"""Holds against a JetStream KV bucket, in memory and on the real server: twenty concurrent
holds of 100 tokens in a 1,000-token day are granted exactly ten times (compare-and-set); the
same step held again (a redelivery) is granted what it was, without a second hold; a step its
request's hold covers writes nothing, one it does not replaces the hold; a request's count drops
its hold; a hold whose request died lapses after its time, giving its room back; and a call its
day or its session refuses leaves no hold in the other."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from contracts import Usage
from services.runtime.base.settings import Settings
from services.runtime.budgets.accounts import Day, Days, day_key, session_key
from services.runtime.budgets.asks import Ask
from services.runtime.budgets.holds import hold, hold_both
from services.runtime.budgets.limits import Limit
from tests.support.waits import wait_for

LIMITS = (1000, 100.0)


def ask(step: str = "decide", tokens: int = 100, used: int = 0) -> Ask:
    return Ask(step, used, 0.0, tokens, tokens, 0.0)


async def stored(kv: Any) -> Day:
    return Day.model_validate_json((await kv.get("day")).value or b"")


async def test_twenty_concurrent_holds_of_a_tenth_of_the_day_are_granted_exactly_ten_times(
    kv: Any,
) -> None:
    got = await asyncio.gather(
        *(hold(kv, "day", f"r{i}", ask(), LIMITS, "daily", 60) for i in range(20))
    )
    assert sorted(g for g in got if isinstance(g, int)) == [100] * 10
    refused = [g for g in got if isinstance(g, Limit)]
    assert len(refused) == 10
    assert refused[0].note() == (
        "Note: this request stopped at its daily tokens budget (1000 of 1000 used or held, and "
        "its next model call could take 100 more)."
    )
    assert sum(h.tokens for h in (await stored(kv)).held.values()) == 1000


async def test_a_step_held_again_is_granted_the_same_and_a_count_drops_the_hold(
    kv: Any,
) -> None:
    assert await hold(kv, "day", "r1", ask("task:1", 600), LIMITS, "daily", 60) == 600
    assert await hold(kv, "day", "r1", ask("task:1", 600), LIMITS, "daily", 60) == 600
    assert (await stored(kv)).committed(time.time()) == (600, 0.0)
    # A next step its hold covers (50 used, 300 more) writes nothing; one it does not cover
    # replaces the hold: what it used (50) and its 700.
    assert await hold(kv, "day", "r1", ask("evaluate:1", 300, 50), LIMITS, "daily", 60) == 300
    assert (await stored(kv)).held["r1"].step == "task:1"
    assert await hold(kv, "day", "r1", ask("evaluate:1", 700, 50), LIMITS, "daily", 60) == 700
    assert (await stored(kv)).committed(time.time()) == (750, 0.0)
    day, fresh = await Days(kv).charge("p", "r1", Usage.of_call("m", 40, 30), 0.0, key="day")
    assert fresh and day.held == {} and day.committed(time.time()) == (70, 0.0)


async def test_a_hold_whose_request_died_lapses_after_its_time(kv: Any) -> None:
    assert await hold(kv, "day", "dead", ask("task:1", 950), LIMITS, "daily", 1.0) == 950
    taken = time.monotonic()
    assert isinstance(await hold(kv, "day", "alive", ask(), LIMITS, "daily", 60), Limit)

    async def granted() -> bool:
        return await hold(kv, "day", "alive", ask(), LIMITS, "daily", 60) == 100

    await wait_for(granted, timeout=10)
    assert time.monotonic() - taken >= 0.9
    assert list((await stored(kv)).held) == ["alive"]  # the lapsed hold is gone from the value


@pytest.mark.parametrize(
    ("day", "session", "refused_by"),
    [(1000, 150, "session tokens"), (150, 1000, "daily tokens")],
)
async def test_a_call_refused_by_its_day_or_its_session_leaves_no_hold_in_the_other(
    kv: Any, day: int, session: int, refused_by: str
) -> None:
    settings = Settings(budget_daily_tokens=day, budget_session_tokens=session)
    who = ("pat", "pat/s1")
    assert await hold_both(kv, settings, who, "r1", ask(tokens=100)) is None
    refused = await hold_both(kv, settings, who, "r2", ask(tokens=100))
    assert isinstance(refused, Limit) and refused.what == refused_by
    for key in (day_key("pat"), session_key(*who)):
        assert list(Day.model_validate_json((await kv.get(key)).value or b"").held) == ["r1"]
