"""Budget holds on one principal's day, in one process, a local nats-server:

- per-step holds: N concurrent holds of one key, each a compare-and-set of the day's value in
  turns (services/runtime/budgets/holds.py), and the same holds counted (the request's end
  drops its hold);
- through the seam, as a service spends: N concurrent steps of one principal (`Budget.step`,
  held, then counted), which a busy principal's lease serves (services/runtime/budgets/leases.py),
  with the writes they made to the bucket and the time until every count landed.

    python -m bench.holds [N ...]      (default: 50 200 1000)
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import nats

from contracts import ChatRequested, Usage
from services.runtime.base.settings import Settings
from services.runtime.budgets import Budget
from services.runtime.budgets.accounts import Day, Days, day_key
from services.runtime.budgets.asks import Ask
from services.runtime.budgets.holds import hold
from services.runtime.budgets.leases import HOT_STEPS
from services.runtime.bus.natsserver import NatsServer


class Counted:
    """A KV bucket whose reads and writes (get, create, update) are counted in `n`; the
    gateway's admission test counts its reads with it too (tests/budgets/test_admission.py)."""

    def __init__(self, kv: Any) -> None:
        self.kv = kv
        self.n = 0

    async def get(self, key: str) -> Any:
        self.n += 1
        return await self.kv.get(key)

    async def create(self, key: str, value: bytes) -> int:
        self.n += 1
        return int(await self.kv.create(key, value))

    async def update(self, key: str, value: bytes, last: int) -> int:
        self.n += 1
        return int(await self.kv.update(key, value, last=last))


async def per_step(kv: Any, n: int) -> None:
    key = f"day{n}"
    ask = Ask("task:1", 0, 0.0, 100, 100, 0.0)
    started = time.perf_counter()
    await asyncio.gather(
        *(hold(kv, key, f"r{i}", ask, (10**9, 1e9), "daily", 60) for i in range(n))
    )
    held = time.perf_counter() - started
    started = time.perf_counter()
    usage = Usage.of_call("m", 60, 40)
    await asyncio.gather(*(Days(kv).charge("p", f"r{i}", usage, 0.0, key=key) for i in range(n)))
    counted = time.perf_counter() - started
    print(
        f"{n:>6} concurrent per-step holds on one key: {held:6.2f} s ({held / n * 1000:.2f} ms "
        f"each); counting them: {counted:6.2f} s"
    )


async def leased(kv: Any, n: int) -> None:
    principal = f"bench{n}"
    spend = Budget(lambda: kv, Settings(), "bench")
    usage = Usage.of_call("m", 60, 40)

    async def step(request_id: str, session: int) -> None:
        req = ChatRequested(
            request_id=request_id,
            session_id=f"{principal}/s{session}",
            principal=principal,
            message="",
        )
        async with spend.step(req, Ask("frontline", 0, 0.0, 5000, 5000, 0.0)) as meter:
            meter.add(usage)

    for i in range(HOT_STEPS):  # the principal becomes busy here
        await step(f"warm{i}", 0)
    before = kv.n
    started = time.perf_counter()
    await asyncio.gather(*(step(f"r{i}", i % 100) for i in range(n)))
    held = time.perf_counter() - started
    writes = kv.n - before
    while True:
        entry = await kv.kv.get(day_key(principal))
        if Day.model_validate_json(entry.value or b"").calls >= n + HOT_STEPS:
            break
        await asyncio.sleep(0.05)
    landed = time.perf_counter() - started
    await spend.drain()
    print(
        f"{n:>6} concurrent steps of one principal through Budget.step (leased): {held:6.2f} s "
        f"({held / n * 1000:.2f} ms each), {writes} reads and writes of the bucket "
        f"({writes / n:.2f} a step, 100 sessions); every count landed after {landed:.2f} s"
    )


async def measure(url: str, sizes: list[int]) -> None:
    nc = await nats.connect(url)
    js = nc.jetstream()
    kv = await js.create_key_value(bucket="bench_holds")
    try:
        for n in sizes:
            await per_step(kv, n)
        for n in sizes:
            await leased(Counted(kv), n)
    finally:
        await nc.close()


def main() -> int:
    sizes = [int(a) for a in sys.argv[1:]] or [50, 200, 1000]
    server = NatsServer(store_dir=Path(tempfile.mkdtemp(prefix="bench-holds-"))).start()
    try:
        asyncio.run(measure(server.url, sizes))
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
