"""`python -m bench`: start the system, run every part, print a table and JSON, write
bench/results/latest.json and latest.md. `--quick` is a small smoke run (well under a minute)."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import latency, load, scaleout
from bench.floor import drive as floor_drive
from bench.recovery import recovery
from bench.report import ratios, render, targets
from bench.system import ROOT, RssSampler, Stack, raise_fd_limit
from services.runtime.base.children import killed_with_parent
from services.runtime.base.eventloop import run_loop

# Idle sockets first, on a fresh gateway, so the figure is what the sockets cost; recovery last
# (it kills and restarts services).
PARTS = ("idle", "overhead", "streaming", "floor", "concurrency", "langgraph", "recovery")

FULL = {
    "requests": 2000,
    "warmup": 50,
    "stream_requests": 1000,
    "levels": "50,200,1000",
    "latency_ms": 500.0,
    "duration": 30.0,
    "idle": 5000,
    "hold": 5.0,
    "recovery_requests": 20,
    "recovery_hold_ms": 2000.0,
}
QUICK = {
    "requests": 10,
    "warmup": 2,
    "stream_requests": 10,
    "levels": "4,16",
    "latency_ms": 50.0,
    "duration": 1.5,
    "idle": 50,
    "hold": 0.5,
    "recovery_requests": 4,
    "recovery_hold_ms": 500.0,
}


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--quick", action="store_true", help="tiny counts: a smoke run")
    p.add_argument("--only", default=",".join(PARTS), help=f"comma-separated of {','.join(PARTS)}")
    p.add_argument("--requests", type=int, help="overhead requests per path (default 2000)")
    p.add_argument("--warmup", type=int, help="unmeasured requests first (default 50)")
    p.add_argument("--stream-requests", type=int, help="streaming requests (default 1000)")
    p.add_argument("--token-gap-ms", type=float, default=2.0, help="streaming: gap between tokens")
    p.add_argument("--levels", help="concurrent sessions per level (default 50,200,1000)")
    p.add_argument("--path", default="orchestrated_1", help="concurrency workload path")
    p.add_argument("--latency-ms", type=float, help="concurrency: model latency (default 500)")
    p.add_argument("--duration", type=float, help="concurrency: measured seconds per level")
    p.add_argument("--idle", type=int, help="idle sockets to open (default 5000)")
    p.add_argument("--hold", type=float, help="seconds to hold the idle sockets")
    p.add_argument(
        "--recovery-requests", type=int, help="recovery: routed requests in flight (default 20)"
    )
    p.add_argument(
        "--recovery-hold-ms",
        type=float,
        help="recovery: model latency while the requests gather at the victim (default 2000)",
    )
    p.add_argument(
        "--max-concurrency",
        type=int,
        default=1024,
        help="SIDEKICK_MAX_CONCURRENCY for the services (default 1024: the 64 default would cap "
        "1,000 sessions at the services' in-flight limit, not at the bus)",
    )
    p.add_argument(
        "--principals",
        type=int,
        help="distinct users (bearer tokens) the sessions belong to; 0 = auth off, all "
        "sessions one `anonymous` principal (default: one per session of the largest level)",
    )
    p.add_argument(
        "--cache",
        action="store_true",
        help="keep the semantic cache on (off by default: its lookup cost grows with the "
        "number of cached answers, which would make every figure depend on the run's length)",
    )
    p.add_argument(
        "--replicas", type=int, default=1, help="processes of every service but the gateway"
    )
    p.add_argument(
        "--gateways", type=int, help="gateways, the sessions spread over them (default: replicas)"
    )
    p.add_argument(
        "--nats-url",
        help="use this NATS server instead of starting one (its counters are not read, so "
        "the overhead part is refused); the services bootstrap their streams on it",
    )
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results", help="results dir")
    args = p.parse_args(argv)
    defaults = QUICK if args.quick else FULL
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.parts = [x.strip() for x in args.only.split(",") if x.strip()]
    if args.principals is None:
        args.principals = max(int(x) for x in args.levels.split(",") if x.strip())
    if args.gateways is None:
        args.gateways = args.replicas
    if args.replicas < 1 or args.gateways < 1:
        p.error("--replicas and --gateways take 1 or more")
    if args.nats_url and "overhead" in args.parts:
        p.error("--nats-url: leave out the overhead part (it reads the embedded server's counters)")
    unknown = set(args.parts) - set(PARTS)
    if unknown:
        p.error(f"unknown parts: {', '.join(sorted(unknown))}")
    return args


def commit() -> str | None:
    """The commit measured (BENCH_COMMIT when run from an exported tree without .git)."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        )
    except OSError:
        out = None
    if out is not None and out.returncode == 0:
        return out.stdout.strip() + (" (with uncommitted changes)" if dirty() else "")
    return os.environ.get("BENCH_COMMIT")


def dirty() -> bool:
    out = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no", "--", "services", "contracts"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return bool(out.stdout.strip())


def loadavg() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def langgraph_levels(stack: Stack, levels: list[int], args: argparse.Namespace) -> dict[str, Any]:
    proc = subprocess.run(
        [
            sys.executable,
            *("-m", "bench.langgraph_baseline", "--base-url", stack.model.base_url),
            *("--levels", ",".join(str(n) for n in levels), "--path", args.path),
            *("--latency-ms", str(args.latency_ms), "--duration", str(args.duration)),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=len(levels) * (args.duration + 120),
        preexec_fn=killed_with_parent,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"the LangGraph baseline failed:\n{proc.stderr[-3000:]}")
    figures: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return figures


async def run_parts(stack: Stack, sampler: RssSampler, args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {"load_by_part": {}}
    levels = [int(x) for x in args.levels.split(",") if x.strip()]

    def mark(part: str, started: float) -> None:
        results["load_by_part"][part] = {
            "seconds": round(time.monotonic() - started, 1),
            "load_after": loadavg(),
        }
        print(f"  {part} done in {time.monotonic() - started:.1f}s (load {loadavg()})", flush=True)

    for part in args.parts:
        started = time.monotonic()
        print(f"- {part} ...", flush=True)
        if part == "overhead":
            results["overhead"] = await latency.overhead(stack, args.requests, args.warmup)
        elif part == "streaming":
            results["streaming"] = await latency.streaming(
                stack, args.stream_requests, args.warmup, args.token_gap_ms
            )
        elif part == "idle":
            results["idle"] = await load.idle_sockets(stack, sampler, args.idle, args.hold)
        elif part == "recovery":
            results["recovery"] = await recovery(
                stack, args.recovery_requests, args.recovery_hold_ms
            )
            sampler.pids.update(stack.pids())  # the restarted services
        elif part == "floor":
            nats_pid = stack.pids().get("nats-server")
            results["floor"] = await floor_drive(
                stack.nats_url, args.requests, args.warmup, 600, nats_pid
            )
        elif part == "concurrency":
            results["concurrency"] = await load.concurrency(
                stack,
                sampler,
                levels,
                path=args.path,
                latency_ms=args.latency_ms,
                duration=args.duration,
            )
        elif part == "langgraph":
            if importlib.util.find_spec("langgraph") is None:
                results["langgraph"] = {
                    "skipped": "langgraph not installed (pip install -e .[bench])"
                }
            else:
                stack.model.configure(latency_ms=args.latency_ms)
                try:
                    results["langgraph"] = await asyncio.to_thread(
                        langgraph_levels, stack, levels, args
                    )
                finally:
                    stack.model.configure(latency_ms=0)
        mark(part, started)
    return results


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    fd_limit = raise_fd_limit(2 * args.idle + 4096)
    command = "python -m bench" + (" " + " ".join(sys.argv[1:]) if len(sys.argv) > 1 else "")
    results: dict[str, Any] = {
        "meta": {
            "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "command": command,
            "commit": commit(),
            "quick": args.quick,
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "load_start": loadavg(),
            "fd_limit": fd_limit,
            "config": {
                k: getattr(args, k)
                for k in (
                    *FULL,
                    "token_gap_ms",
                    "path",
                    "max_concurrency",
                    "cache",
                    "principals",
                    "parts",
                    "replicas",
                    "gateways",
                )
            },
        }
    }
    stack = Stack(
        max_concurrency=args.max_concurrency,
        cache=args.cache,
        principals=args.principals,
        replicas=args.replicas,
        gateways=args.gateways,
        external_nats=args.nats_url,
    )
    print(
        f"starting nats-server, the fake model and the services ({args.replicas} of each, "
        f"{args.gateways} gateway(s); load {loadavg()}) ..."
    )
    started = time.monotonic()
    sampler: RssSampler | None = None
    try:
        stack.start()
        results["meta"]["startup_seconds"] = round(time.monotonic() - started, 1)
        sampler = RssSampler(stack.pids()).start()
        results.update(run_loop(run_parts(stack, sampler, args)))
        results["meta"]["lifetime_peak_rss_mib"] = sampler.lifetime_peaks()
    finally:
        if sampler is not None:
            sampler.stop()
        stack.stop(keep_logs=args.out / "logs")
    results["meta"]["load_end"] = loadavg()
    results["ratios"] = ratios(results)
    results["targets"] = targets(results)
    text = "\n".join([render(results).rstrip("\n"), *scaleout.render(results)]) + "\n"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "latest.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.out / "latest.md").write_text(text)
    print()
    print(text)
    print(f"--- JSON (also in {args.out / 'latest.json'})")
    print(json.dumps(results, indent=2))
    return 0
