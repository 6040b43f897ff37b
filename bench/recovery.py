"""Recovery: requests in flight when the process holding them is SIGKILLed.

For each victim (the orchestrator, then the workers): N routed requests are sent at once while
the model answers slowly, so that all N wait in the victim's model call; once the fake model
has seen the N calls, the victim is SIGKILLed and started again at once (as a supervisor or
Kubernetes would), and the model answers instantly from then on. Reported: seconds from the
kill until the new process was ready, and until each request completed (p50, max), with the
errors. JetStream delivers the dead process's messages again once their ack wait
(`SIDEKICK_ACK_WAIT`) runs out, counted from the last in-progress heartbeat before the kill.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

from bench.client import EXPECT, PATHS, Session, summary
from bench.system import Stack
from services.runtime.base.settings import Settings

VICTIMS = {"orchestrator": "bench-orchestrator", "workers": "bench-worker"}
PATH = "orchestrated_1"


async def wait_calls(stack: Stack, model: str, at_least: int, limit: float) -> None:
    deadline = time.monotonic() + limit
    while stack.model.calls().get(model, 0) < at_least:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the {model} calls did not arrive")
        await asyncio.sleep(0.02)


async def one(stack: Stack, victim: str, requests: int, hold_ms: float) -> dict[str, Any]:
    model = VICTIMS[victim]
    message, _ = PATHS[PATH]
    sessions = [await Session(stack.ws_url, stack.token(k)).open() for k in range(requests)]
    try:
        before = stack.model.calls().get(model, 0)
        stack.model.configure(latency_ms=hold_ms)
        sent = [asyncio.create_task(s.request(message, EXPECT[PATH], 120)) for s in sessions]
        await wait_calls(stack, model, before + requests, hold_ms / 1000 * 4 + 30)
        killed = time.monotonic_ns()
        stack.kill(victim)
        stack.model.configure(latency_ms=0)
        await asyncio.to_thread(stack.restart, victim)
        ready = time.monotonic_ns()
        outcomes = await asyncio.gather(*sent)
    finally:
        stack.model.configure(latency_ms=0)
        for s in sessions:
            await s.close()
    done = [(o.end_ns - killed) / 1e9 for o in outcomes if not o.error]
    errors = Counter(o.error for o in outcomes if o.error)
    return {
        "in_flight": requests,
        "ready_after_s": round((ready - killed) / 1e9, 2),
        "completed": len(done),
        "done_after_s": summary(done),
        "all_done_after_s": round(max(done), 2) if len(done) == requests else None,
        "errors": sum(errors.values()),
        "error_kinds": dict(errors),
    }


async def recovery(stack: Stack, requests: int, hold_ms: float) -> dict[str, Any]:
    results: dict[str, Any] = {
        "requests": requests,
        "ack_wait_s": float(
            stack.env().get("SIDEKICK_ACK_WAIT", Settings.model_fields["ack_wait"].default)
        ),
        "victims": {},
    }
    for victim in VICTIMS:
        results["victims"][victim] = await one(stack, victim, requests, hold_ms)
    return results
