"""The gateway's admission (services/runtime/budgets/admission.py), on a KV bucket in memory and on
the real server: a principal that is not busy has its day and session read for every new
request, so a spent day is refused at once; a busy one (more than HOT_STEPS requests within
HOT_WINDOW seconds) has them read at most once every SIDEKICK_BUDGET_ADMISSION_SECONDS, so a day
spent meanwhile is refused that much later at most, and then every time."""

from __future__ import annotations

import asyncio
from typing import Any

from bench.holds import Counted
from contracts import Usage
from services.runtime.base.settings import Settings
from services.runtime.budgets.accounts import Days, day_key
from services.runtime.budgets.admission import Admission
from services.runtime.budgets.leases import HOT_STEPS


def admission(kv: Any, seconds: float) -> Admission:
    settings = Settings(budget_daily_tokens=1000, budget_admission_seconds=seconds)
    return Admission(lambda: kv, settings)


async def spend_the_day(kv: Any) -> None:
    await Days(kv).charge("pat", "r1", Usage.of_call("m", 900, 200), 0.0, key=day_key("pat"))


async def test_a_principal_not_busy_is_read_every_time(kv: Any) -> None:
    reads = Counted(kv)
    gate = admission(reads, 60)
    for _ in range(HOT_STEPS):
        assert await gate.refusal("pat", "pat/s1") is None
    assert reads.n == 2 * HOT_STEPS  # the day and the session, each time
    await spend_the_day(kv)
    refused = await gate.refusal("pat", "pat/s1")
    assert refused is not None and "Today's budget for pat is spent" in refused.message


async def test_a_busy_principal_is_read_once_a_period_and_refused_within_it(kv: Any) -> None:
    reads = Counted(kv)
    gate = admission(reads, 0.5)
    for _ in range(HOT_STEPS + 1):
        assert await gate.refusal("pat", "pat/s1") is None
    counted = reads.n
    for _ in range(20):  # busy: served from what was read
        assert await gate.refusal("pat", "pat/s1") is None
    assert reads.n == counted
    await spend_the_day(kv)
    assert await gate.refusal("pat", "pat/s1") is None  # within the period: not seen yet
    await asyncio.sleep(0.6)
    for _ in range(3):  # read again once the period is over; refused from then on
        refused = await gate.refusal("pat", "pat/s1")
        assert refused is not None and "Today's budget for pat is spent" in refused.message
    assert reads.n == counted + 2


async def test_no_period_means_every_request_reads(kv: Any) -> None:
    reads = Counted(kv)
    gate = admission(reads, 0)
    for _ in range(HOT_STEPS + 5):
        await gate.refusal("pat", "pat/s1")
    assert reads.n == 2 * (HOT_STEPS + 5)
