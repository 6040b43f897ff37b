"""Budget holds on one key: how long N concurrent holds of one principal's day take in one
process (each a compare-and-set of the day's value, in turns: services/runtime/budgets/holds.py),
and the same holds counted (the request's end drops its hold). Prints the figures.

    python -m bench.holds [N ...]      (default: 50 200 1000)
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

import nats

from contracts import Usage
from services.runtime.budgets.accounts import Days
from services.runtime.budgets.asks import Ask
from services.runtime.budgets.holds import hold
from services.runtime.bus.natsserver import NatsServer


async def measure(url: str, sizes: list[int]) -> None:
    nc = await nats.connect(url)
    js = nc.jetstream()
    kv = await js.create_key_value(bucket="bench_holds")
    try:
        for n in sizes:
            key = f"day{n}"
            ask = Ask("task:1", 0, 0.0, 100, 100, 0.0)
            started = time.perf_counter()
            await asyncio.gather(
                *(hold(kv, key, f"r{i}", ask, (10**9, 1e9), "daily", 60) for i in range(n))
            )
            held = time.perf_counter() - started
            started = time.perf_counter()
            usage = Usage.of_call("m", 60, 40)
            await asyncio.gather(
                *(Days(kv).charge("p", f"r{i}", usage, 0.0, key=key) for i in range(n))
            )
            counted = time.perf_counter() - started
            print(
                f"{n:>6} concurrent holds on one key: {held:6.2f} s ({held / n * 1000:.2f} ms "
                f"each); counting them: {counted:6.2f} s"
            )
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
