"""Per-operation costs of the hot spots the profiles point at, each next to its cheaper
alternative, measured in one process as CPU microseconds per operation (time.process_time, so
other load on the machine inflates both sides alike). `python -m bench.hotspots`.

1. A FastStream handler taking `msg: NatsMessage` (FastDepends resolves that parameter with a
   sync context lookup, which it runs in a worker thread for every message) vs one reading the
   message from the broker's context.
2. A publish through FastStream with Sidekick's OpenTelemetry + Prometheus middlewares vs a
   bare FastStream broker vs nats-py.
3. A chat completion through the `openai` SDK's `create()` vs the SDK's lower-level `post()`
   (same client, no params transform) vs Sidekick's endpoint (one POST on an aiohttp session
   with the SDK client's headers, an orjson body, the reply read as raw JSON; streamed: a lean
   SSE loop) vs plain httpx, all against the bench's fake model.
4. Building the strict JSON schema of a structured output (done on every structured call).
5. A semantic-cache lookup scanning N cached 1536-dimension embeddings in Python.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import nats
import openai
from faststream.nats import NatsBroker, NatsMessage
from faststream.nats.opentelemetry import NatsTelemetryMiddleware
from faststream.nats.prometheus import NatsPrometheusMiddleware
from openai.types.chat import ChatCompletion
from prometheus_client import CollectorRegistry

from bench.system import FakeModel
from contracts.decisions import OrchestratorDecision
from services.runtime.base.settings import LLMConfig
from services.runtime.base.telemetry import setup_tracing
from services.runtime.bus.natsserver import NatsServer
from services.runtime.llm import StreamResult, response_format
from services.runtime.llm.endpoint import Endpoint

QUIET = logging.getLogger("bench.quiet")
QUIET.setLevel(logging.WARNING)


async def cpu_us(n: int, op: Callable[[], Awaitable[None]]) -> float:
    await op()  # warm
    started = time.process_time()
    for _ in range(n):
        await op()
    return round((time.process_time() - started) * 1e6 / n, 1)


async def consume_one(url: str, n: int, *, from_context: bool) -> float:
    broker = NatsBroker(url, logger=QUIET)
    got = asyncio.Event()
    count = {"n": 0}
    subject = f"hot.{random.getrandbits(32)}"

    def seen() -> None:
        count["n"] += 1
        if count["n"] >= n:
            got.set()

    if from_context:

        @broker.subscriber(subject)
        async def from_the_context() -> None:
            msg: NatsMessage = broker.context.get_local("message")
            assert msg is not None
            seen()

    else:

        @broker.subscriber(subject)
        async def with_param(msg: NatsMessage) -> None:
            seen()

    await broker.start()
    nc = await nats.connect(url)
    started = time.process_time()
    for i in range(n):
        await nc.publish(subject, b"{}")
        if i % 200 == 0:
            await nc.flush()
    await nc.flush()
    await asyncio.wait_for(got.wait(), 120)
    cost = round((time.process_time() - started) * 1e6 / n, 1)
    await nc.close()
    await broker.stop()
    return cost


async def consume_cost(url: str, n: int) -> dict[str, float]:
    return {
        "handler(msg: NatsMessage)": await consume_one(url, n, from_context=False),
        "handler() reading the message from broker.context": await consume_one(
            url, n, from_context=True
        ),
    }


async def publish_cost(url: str, n: int) -> dict[str, float]:
    provider = setup_tracing("bench")
    traced = NatsBroker(
        url,
        logger=QUIET,
        middlewares=[
            NatsTelemetryMiddleware(tracer_provider=provider),
            NatsPrometheusMiddleware(registry=CollectorRegistry(), app_name="bench"),
        ],
    )
    bare = NatsBroker(url, logger=QUIET)
    await traced.connect()
    await bare.connect()
    nc = await nats.connect(url)
    body = json.dumps({"kind": "stream.chunk", "text": "hello " * 4}).encode()
    headers = {"content-type": "application/json"}

    async def write_each() -> None:
        await nc.publish("hot.pub", body, headers=headers)
        await asyncio.sleep(0)  # the client's flusher writes it before the next one

    async def reply(msg: Any) -> None:
        await msg.respond(b"ok")

    await nc.subscribe("hot.rr", cb=reply)

    async def round_trip() -> None:
        await nc.request("hot.rr", b"q", timeout=5)

    out = {
        "FastStream + telemetry + prometheus": await cpu_us(
            n, lambda: traced.publish(body, "hot.pub", headers=headers)
        ),
        "FastStream, no middlewares": await cpu_us(
            n, lambda: bare.publish(body, "hot.pub", headers=headers)
        ),
        "nats-py": await cpu_us(n, lambda: nc.publish("hot.pub", body, headers=headers)),
        "nats-py, one socket write each (no batching)": await cpu_us(n, write_each),
        "nats-py request/reply through nats-server (both ends here)": await cpu_us(
            max(n // 4, 100), round_trip
        ),
    }
    await nc.close()
    await traced.stop()
    await bare.stop()
    return out


async def llm_call_cost(base_url: str, n: int) -> dict[str, float]:
    messages = [
        {"role": "system", "content": "You are Sidekick's orchestrator. " * 20},
        {"role": "user", "content": "please look this up #orch"},
    ]
    fmt = response_format(OrchestratorDecision)
    client = openai.AsyncOpenAI(base_url=base_url, api_key="bench-key")
    raw = httpx.AsyncClient(base_url=base_url, headers={"authorization": "Bearer bench-key"})
    payload = {"model": "bench-orchestrator", "messages": messages, "response_format": fmt}

    async def sdk() -> None:
        resp = await client.chat.completions.create(
            model="bench-orchestrator",
            messages=messages,  # type: ignore[arg-type]
            response_format=fmt,  # type: ignore[arg-type]
        )
        assert resp.choices[0].message.content

    async def sdk_post() -> None:
        # The SDK's own client (auth, retries, typed reply), minus create()'s params transform.
        resp = await client.post("/chat/completions", body=payload, cast_to=ChatCompletion)
        assert resp.choices[0].message.content

    async def plain() -> None:
        resp = await raw.post("/chat/completions", json=payload)
        assert resp.json()["choices"][0]["message"]["content"]

    async def sdk_stream() -> None:
        stream = await client.chat.completions.create(
            model="bench-frontline",
            messages=messages,  # type: ignore[arg-type]
            stream=True,
        )
        async for _ in stream:
            pass

    config = LLMConfig("orchestrator", base_url, "bench-key", "bench-orchestrator")
    lean = Endpoint(config, timeout=30, max_retries=0)
    streamed = Endpoint(
        LLMConfig("frontline", base_url, "bench-key", "bench-frontline"), timeout=30, max_retries=0
    )

    async def ours() -> None:
        reply = await lean.chat(messages, response_format=fmt)  # type: ignore[arg-type]
        assert reply.content

    async def ours_stream() -> None:
        result = StreamResult()
        async for _ in streamed.stream(messages, result):  # type: ignore[arg-type]
            pass
        assert result.text

    out = {
        "openai SDK, JSON reply": await cpu_us(n, sdk),
        "Endpoint.chat (aiohttp POST, SDK headers and errors, orjson)": await cpu_us(n, ours),
        "openai SDK client.post (no params transform)": await cpu_us(n, sdk_post),
        "httpx, same request": await cpu_us(n, plain),
        "openai SDK, streamed reply (9 tokens)": await cpu_us(n, sdk_stream),
        "Endpoint.stream (aiohttp POST, lean SSE loop), 9 tokens": await cpu_us(n, ours_stream),
    }
    await client.close()
    await raw.aclose()
    return out


def schema_cost(n: int) -> dict[str, float]:
    started = time.process_time()
    for _ in range(n):
        response_format(OrchestratorDecision)
    return {
        "response_format(OrchestratorDecision)": round((time.process_time() - started) * 1e6 / n, 1)
    }


def cache_scan_cost() -> dict[str, float]:
    """The semantic cache's lookup loop (services/orchestrator/cache.py) over N entries."""
    dims = 1536
    rng = random.Random(1)
    query = [rng.gauss(0, 1) for _ in range(dims)]
    out: dict[str, float] = {}
    for entries in (100, 1000, 5000):
        index = [[rng.gauss(0, 1) for _ in range(dims)] for _ in range(entries)]
        started = time.process_time()
        best = -1.0
        for unit in index:
            score = sum(a * b for a, b in zip(unit, query, strict=True))
            best = max(best, score)
        out[f"{entries} entries (ms per lookup)"] = round((time.process_time() - started) * 1e3, 1)
    return out


async def measure(url: str, base_url: str, n: int) -> dict[str, Any]:
    return {
        "consume (µs CPU per message)": await consume_cost(url, n),
        "publish (µs CPU per message)": await publish_cost(url, n),
        "model call (µs CPU per call, client side)": await llm_call_cost(base_url, max(n // 5, 50)),
        "structured-output schema (µs per call)": schema_cost(max(n // 5, 50)),
        "semantic cache scan": cache_scan_cost(),
    }


def main(argv: list[str] | None = None) -> int:
    n = int(argv[0]) if argv else int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    server = NatsServer(store_dir=Path(tempfile.mkdtemp(prefix="bench-hot-"))).start()
    model = FakeModel().start()
    try:
        results = asyncio.run(measure(server.url, model.base_url, n))
    finally:
        model.stop()
        server.stop()
    for part, figures in results.items():
        print(part)
        for name, value in figures.items():
            print(f"  {value:>10}  {name}")
    print(json.dumps(results, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
