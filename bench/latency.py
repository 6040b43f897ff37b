"""Overhead and streaming: one client, one request at a time, an instant model.

Overhead is the end-to-end latency from the client's message frame to its end frame, per path.
Streaming is the time from the fake model writing its first token (a CLOCK_MONOTONIC stamp in
the token itself; CLOCK_MONOTONIC is one clock for every process on a Linux machine) to the
client receiving its first stream frame.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from bench.client import EXPECT, PATHS, Session, summary
from bench.system import Stack, cpu_ms_per, cpu_snapshot

TURNS_PER_SESSION = 10  # a conversation of ten messages, then a new session on the same socket


async def overhead(stack: Stack, requests: int, warmup: int) -> dict[str, Any]:
    stack.model.configure(latency_ms=0, token_gap_ms=0)
    session = await Session(stack.ws_url, stack.token(0)).open()
    results: dict[str, Any] = {}
    try:
        for path, (message, calls) in PATHS.items():
            for _ in range(warmup):
                await session.request(message, EXPECT[path])
            before = stack.model.calls()
            cpu_before = cpu_snapshot(stack.pids())
            nats_before = stack.nats_counters()
            latencies: list[float] = []
            errors: Counter[str] = Counter()
            for i in range(requests):
                if i % TURNS_PER_SESSION == 0:
                    session.new_session()
                out = await session.request(message, EXPECT[path])
                if out.error:
                    errors[out.error] += 1
                else:
                    latencies.append(out.latency_ms)
            cpu = cpu_ms_per(cpu_before, cpu_snapshot(stack.pids()), requests)
            nats_after = stack.nats_counters()
            after = stack.model.calls()
            made = sum(after.values()) - sum(before.values())
            results[path] = {
                **summary(latencies),
                "errors": sum(errors.values()),
                "error_kinds": dict(errors),
                "model_calls_per_request": round(made / max(requests, 1), 2),
                "expected_model_calls": calls,
                "cpu_ms_per_request": cpu,
                "nats_msgs_per_request": {
                    k: round((nats_after[k] - nats_before[k]) / max(requests, 1), 1)
                    for k in ("in_msgs", "out_msgs")
                },
            }
    finally:
        await session.close()
    return results


async def streaming(
    stack: Stack, requests: int, warmup: int, token_gap_ms: float
) -> dict[str, Any]:
    """First token written by the model -> first stream frame at the client (direct path)."""
    stack.model.configure(latency_ms=0, token_gap_ms=token_gap_ms)
    message = PATHS["direct"][0]
    session = await Session(stack.ws_url, stack.token(0)).open()
    added: list[float] = []
    errors: Counter[str] = Counter()
    try:
        for i in range(warmup + requests):
            if i % TURNS_PER_SESSION == 0:
                session.new_session()
            out = await session.request(message, EXPECT["direct"])
            stamp = out.first_token_ns
            if out.error or stamp is None or not out.first_frame_ns:
                errors[out.error or "no_stamp"] += 1
            elif i >= warmup:
                added.append((out.first_frame_ns - stamp) / 1e6)
    finally:
        await session.close()
        stack.model.configure(latency_ms=0, token_gap_ms=0)
    return {
        "first_token_added_ms": summary(added),
        "token_gap_ms": token_gap_ms,
        "errors": sum(errors.values()),
        "error_kinds": dict(errors),
    }
