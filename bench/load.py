"""Concurrency and idle sockets: many WebSocket sessions against one running system.

Concurrency: N sessions, each its own socket, each sending its next message as soon as the last
one ended (a closed loop), with the model answering every call after a fixed latency. Sessions
start spread over one request time, a warm-up is left out, and requests that end inside the
measured window count. The model-bound ideal is N / (model calls per request x latency): what
the system would do if it added nothing to the model's time.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from bench.client import EXPECT, PATHS, Outcome, Session, summary
from bench.scaleout import cores_busy
from bench.system import RssSampler, Stack, cpu_ms_per, cpu_snapshot

OPEN_PARALLEL = 100  # sockets being opened at once


@dataclass
class Window:
    """Which completions count: those that end between `begin_ns` and `end_ns`."""

    begin_ns: int
    end_ns: int
    outcomes: list[Outcome] = field(default_factory=list)


async def open_sessions(stack: Stack, n: int) -> tuple[list[Session], Counter[str]]:
    """n sockets, session k authenticated as the bench's principal k (see Stack.token)."""
    gate = asyncio.Semaphore(OPEN_PARALLEL)
    failures: Counter[str] = Counter()

    async def one(k: int) -> Session | None:
        async with gate:
            try:
                url = stack.ws_urls[k % len(stack.ws_urls)]  # spread over the gateways
                return await Session(url, stack.token(k)).open()
            except Exception as exc:
                failures[type(exc).__name__] += 1
                return None

    opened = await asyncio.gather(*(one(k) for k in range(n)))
    return [s for s in opened if s is not None], failures


async def close_sessions(sessions: list[Session]) -> None:
    gate = asyncio.Semaphore(OPEN_PARALLEL)

    async def one(s: Session) -> None:
        async with gate:
            try:
                await asyncio.wait_for(s.close(), 10)
            except Exception:
                return

    await asyncio.gather(*(one(s) for s in sessions))


def warmup_seconds(sessions: int, request_s: float) -> float:
    """Left out before the window: two request times, and longer for many sessions, whose
    first requests all arrive at once and take a while to reach a steady state."""
    return max(2 * request_s, 1.0, sessions / 100)


async def run_until(window: Window, coros: list[Coroutine[Any, Any, None]], grace: float) -> int:
    """Run the sessions until the window ends; requests still unanswered `grace` seconds later
    are abandoned (counted apart from errors). Returns how many were abandoned."""
    tasks = [asyncio.create_task(c) for c in coros]
    left = (window.end_ns - time.monotonic_ns()) / 1e9 + grace
    _, pending = await asyncio.wait(tasks, timeout=max(left, 0.1))
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    return len(pending)


def window_figures(
    window: Window,
    sessions: int,
    calls: int,
    latency_ms: float,
    errors: Counter[str],
    unfinished: int = 0,
) -> dict[str, Any]:
    inside = [o for o in window.outcomes if window.begin_ns <= o.end_ns <= window.end_ns]
    ok = [o.latency_ms for o in inside if o.error is None]
    seconds = (window.end_ns - window.begin_ns) / 1e9
    rps = len(ok) / seconds
    ideal = sessions / (calls * latency_ms / 1000)
    return {
        "sessions": sessions,
        "window_s": round(seconds, 2),
        "completed": len(ok),
        "rps": round(rps, 2),
        "ideal_rps": round(ideal, 2),
        "of_ideal": round(rps / ideal, 4),
        "errors": sum(errors.values()),
        "error_kinds": dict(errors),
        "unfinished_at_end": unfinished,
        "latency_ms": summary(ok),
    }


async def concurrency_level(
    stack: Stack,
    sampler: RssSampler,
    sessions: int,
    *,
    path: str,
    latency_ms: float,
    duration: float,
    request_timeout: float,
) -> dict[str, Any]:
    message, calls = PATHS[path]
    expect = EXPECT[path]
    request_s = calls * latency_ms / 1000
    opened, open_failures = await open_sessions(stack, sessions)
    errors: Counter[str] = Counter({f"open:{k}": v for k, v in open_failures.items()})
    sampler.reset()
    start = time.monotonic_ns()
    warmup_s = warmup_seconds(sessions, request_s)
    window = Window(
        begin_ns=start + int(warmup_s * 1e9), end_ns=start + int((warmup_s + duration) * 1e9)
    )

    async def run(session: Session) -> None:
        await asyncio.sleep(random.uniform(0, request_s))  # spread the first requests
        while time.monotonic_ns() < window.end_ns:
            out = await session.request(message, expect, limit_s=request_timeout)
            window.outcomes.append(out)
            if out.error is not None:
                errors[out.error] += 1
                if out.error not in ("unexpected_answer", "request_failed", "llm_unavailable"):
                    return  # the socket is gone or stuck: this session stops

    async def cpu_in_window() -> tuple[dict[str, float], dict[str, float]]:
        await asyncio.sleep(max(0.0, (window.begin_ns - time.monotonic_ns()) / 1e9))
        first = cpu_snapshot(stack.pids())
        await asyncio.sleep(max(0.0, (window.end_ns - time.monotonic_ns()) / 1e9))
        return first, cpu_snapshot(stack.pids())

    cpu = asyncio.create_task(cpu_in_window())
    # Requests in flight when the window closes get their full time limit to end, so one
    # still unanswered then is stuck (lost), not merely slow on a busy machine.
    unfinished = await run_until(window, [run(s) for s in opened], grace=request_timeout + 5.0)
    figures = window_figures(window, sessions, calls, latency_ms, errors, unfinished)
    first, last = await cpu
    figures["cpu_ms_per_request"] = cpu_ms_per(first, last, figures["completed"])
    busy = sum(last[k] - first[k] for k in last if k not in ("fake-model", "bench"))
    figures["sidekick_cpu_cores_busy"] = round(busy / figures["window_s"], 2)
    figures["cores_busy_by_process"] = cores_busy(first, last, figures["window_s"])
    figures["stuck"] = unfinished + errors["timeout"]
    figures["peak_rss_mib"] = sampler.peaks()
    await close_sessions(opened)
    figures["drain_seconds"] = await settle(stack)
    return figures


async def settle(stack: Stack, limit: float = 180.0) -> float:
    """Wait until the system has stopped calling the model (abandoned work done), so one level
    does not run into the next. Returns the seconds it took."""
    started = time.monotonic()
    last = -1
    while time.monotonic() - started < limit:
        calls = sum((await asyncio.to_thread(stack.model.calls)).values())
        if calls == last:
            break
        last = calls
        await asyncio.sleep(1.0)
    return round(time.monotonic() - started, 1)


async def concurrency(
    stack: Stack,
    sampler: RssSampler,
    levels: list[int],
    *,
    path: str,
    latency_ms: float,
    duration: float,
) -> dict[str, Any]:
    stack.model.configure(latency_ms=latency_ms)
    out: dict[str, Any] = {
        "path": path,
        "model_latency_ms": latency_ms,
        "model_calls_per_request": PATHS[path][1],
        "levels": {},
    }
    try:
        for n in levels:
            out["levels"][str(n)] = await concurrency_level(
                stack,
                sampler,
                n,
                path=path,
                latency_ms=latency_ms,
                duration=duration,
                request_timeout=120.0,
            )
    finally:
        stack.model.configure(latency_ms=0)
    return out


async def idle_sockets(stack: Stack, sampler: RssSampler, n: int, hold: float) -> dict[str, Any]:
    """Open n sockets (each sends its init frame), hold them idle, read the gateway's RSS."""
    gateway = stack.procs["gateway"].pid
    sampler.reset()
    before = sampler.current()["gateway"]
    opened_at = time.monotonic()
    sessions, failures = await open_sessions(stack, n)
    open_s = time.monotonic() - opened_at
    await asyncio.sleep(hold)
    with_sockets = sampler.current()["gateway"]
    # The sockets are alive: a sample of them still answer a ping.
    sample = random.sample(sessions, min(20, len(sessions)))
    alive = 0
    for s in sample:
        try:
            assert s.ws is not None
            await asyncio.wait_for(await s.ws.ping(), 10)
            alive += 1
        except Exception:
            continue
    peak = sampler.peaks()["gateway"]
    await close_sessions(sessions)
    return {
        "sockets": n,
        "opened": len(sessions),
        "open_failures": dict(failures),
        "open_seconds": round(open_s, 2),
        "gateway_pid": gateway,
        "gateway_rss_before_mib": before,
        "gateway_rss_mib": with_sockets,
        "gateway_peak_rss_mib": peak,
        "per_socket_kib": round((with_sockets - before) * 1024 / max(len(sessions), 1), 2),
        "pinged_alive": f"{alive}/{len(sample)}",
    }
