"""The floor: the same number of JetStream hops as a Sidekick path, with nats-py and no work in
between. Each hop is a durable consumer read with a standing pull, as Sidekick's are
(services/runtime/bus/consumer.py), with an explicit ack after the next publish, `Nats-Msg-Id` on
every publish, file storage; the last hop is published to an `out.<id>` subject the driver
hears on a core subscription, as the gateway does. The relays run in their own process on
uvloop, as Sidekick's services do: `python -m bench.floor --url ... --hops 2,7,15`. Besides
latency it reports CPU per request of the relays, nats-server and the driver: what moving a
request through that many hops costs before any work is done.

Hops per path (JetStream publishes): direct 2 (chat.requested, out.completed); orchestrated with
one attempt 7 (+ request.routed, worker.run, worker.completed, evaluator.run,
evaluation.completed); with three attempts 15 (four more per extra attempt).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from collections import Counter
from typing import Any

import nats
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, StorageType, StreamConfig

from bench.client import summary
from bench.system import ROOT, cpu_ms_per, cpu_snapshot
from services.runtime.base.children import killed_with_parent
from services.runtime.base.eventloop import run_loop
from services.runtime.bus.consumer import Consumer

HOPS = {"direct": 2, "orchestrated_1": 7, "orchestrated_3": 15}


def subject(prefix: str, chain: int, hop: int) -> str:
    return f"{prefix}.c{chain}.hop{hop}"


async def ensure_stream(js: JetStreamContext, prefix: str) -> None:
    await js.add_stream(
        StreamConfig(
            name=prefix.upper(),
            subjects=[f"{prefix}.>"],
            storage=StorageType.FILE,
            duplicate_window=600,
        )
    )


async def relay(url: str, prefix: str, chains: list[int]) -> None:
    nc: Client = await nats.connect(url)
    js = nc.jetstream()
    consumers: list[Consumer] = []

    async def hop(chain: int, i: int) -> None:
        last = i == chain - 1
        durable = f"{prefix}_c{chain}_h{i}"
        await js.add_consumer(
            prefix.upper(),
            ConsumerConfig(
                durable_name=durable,
                filter_subject=subject(prefix, chain, i),
                ack_policy=AckPolicy.EXPLICIT,
            ),
        )

        async def handle(msg: Msg) -> None:
            rid = (msg.headers or {}).get("rid", "")
            target = f"{prefix}.out.{rid}" if last else subject(prefix, chain, i + 1)
            await js.publish(
                target, msg.data, headers={"Nats-Msg-Id": f"{rid}:{i + 1}", "rid": rid}
            )
            await msg.ack()

        consumer = Consumer(nc, prefix.upper(), durable, 64, handle)
        await consumer.start()
        consumers.append(consumer)

    for chain in chains:
        for i in range(1, chain):
            await hop(chain, i)
    print("relays ready", flush=True)
    await asyncio.Event().wait()


async def drive(
    url: str, requests: int, warmup: int, payload_bytes: int, nats_pid: int | None = None
) -> dict[str, Any]:
    """Sequential requests through each chain, timed from first publish to the final message;
    CPU per request of the relays, nats-server (`nats_pid`) and this driver."""
    prefix = f"floor{int(time.time() * 1000) % 10**9}"
    nc: Client = await nats.connect(url)
    js = nc.jetstream()
    await ensure_stream(js, prefix)
    hops = ",".join(str(h) for h in HOPS.values())
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "bench.floor", "--url", url, "--prefix", prefix, "--hops", hops),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        preexec_fn=killed_with_parent,
    )
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
    if "ready" not in line:
        proc.kill()
        raise RuntimeError(f"floor relays did not start: {line!r}")
    waiting: dict[str, asyncio.Future[int]] = {}

    async def arrived(msg: Msg) -> None:
        fut = waiting.pop(msg.subject.rsplit(".", 1)[-1], None)
        if fut is not None and not fut.done():
            fut.set_result(time.monotonic_ns())

    await nc.subscribe(f"{prefix}.out.*", cb=arrived)
    body = b"x" * payload_bytes
    results: dict[str, Any] = {}
    try:
        for path, chain in HOPS.items():
            latencies: list[float] = []
            errors: Counter[str] = Counter()
            pids = {"relays": proc.pid, **({"nats-server": nats_pid} if nats_pid else {})}
            cpu_before: dict[str, float] = {}
            driver_before = 0.0
            for n in range(warmup + requests):
                if n == warmup:
                    cpu_before = cpu_snapshot(pids)
                    driver_before = time.process_time()
                rid = f"{path}-{n}"
                fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
                waiting[rid] = fut
                sent = time.monotonic_ns()
                await js.publish(
                    subject(prefix, chain, 1), body, headers={"Nats-Msg-Id": f"{rid}:1", "rid": rid}
                )
                try:
                    done = await asyncio.wait_for(fut, 10)
                except TimeoutError:
                    errors["timeout"] += 1
                    continue
                if n >= warmup:
                    latencies.append((done - sent) / 1e6)
            cpu = cpu_ms_per(cpu_before, cpu_snapshot(pids), requests)
            cpu["driver"] = round((time.process_time() - driver_before) * 1000 / requests, 2)
            cpu["total"] = round(sum(v for k, v in cpu.items() if k != "sidekick"), 2)
            cpu.pop("sidekick", None)
            results[path] = {
                "hops": chain,
                **summary(latencies),
                "errors": sum(errors.values()),
                "cpu_ms_per_request": cpu,
            }
    finally:
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except TimeoutError:
            proc.kill()
            await proc.wait()
        with contextlib.suppress(Exception):
            await js.delete_stream(prefix.upper())
        await nc.close()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.floor", description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--hops", required=True, help="chain lengths, e.g. 2,7,15")
    args = parser.parse_args(argv)
    chains = [int(h) for h in args.hops.split(",")]
    # On the loop Sidekick's services run on, so the ratio isolates what their code adds.
    with contextlib.suppress(KeyboardInterrupt):
        run_loop(relay(args.url, args.prefix, chains))
    return 0


if __name__ == "__main__":
    sys.exit(main())
