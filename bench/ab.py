"""A/B of two versions of the code, side by side: both systems run at once (each its own
nats-server, fake model and five services, from its own copy of the code) and the driver sends
their requests in turn, one to A, one to B, so that whatever else loads the machine falls on
both alike. CPU milliseconds per request per process (what the processes spent, not the time
they waited) are the figures to decide by; p50 is shown beside them.

    python -m bench.ab main HEAD --requests 300
    python -m bench.ab HEAD WORKTREE          # WORKTREE: the files as they are now

Each version is exported (`git archive`, or a copy of the work tree) to a temporary folder.
The driver, the fake model and the client are this tree's; the model calls each version makes
are counted by its own fake model.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.client import EXPECT, PATHS, Session
from bench.system import ROOT, Stack, cpu_ms_per, cpu_snapshot
from services.runtime.base.eventloop import run_loop

COPIED = ("bench", "contracts", "services", "pyproject.toml")
TURNS = 10


def export(ref: str, into: Path) -> Path:
    into.mkdir(parents=True)
    if ref == "WORKTREE":
        for name in COPIED:
            src = ROOT / name
            if src.is_dir():
                shutil.copytree(src, into / name, ignore=shutil.ignore_patterns("results"))
            else:
                shutil.copy(src, into / name)
        return into
    archive = subprocess.run(
        ["git", "archive", "--format=tar", ref, *COPIED], cwd=ROOT, capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


async def paired(stacks: dict[str, Stack], path: str, n: int, warmup: int) -> dict[str, Any]:
    message = PATHS[path][0]
    sessions = {k: await Session(s.ws_url, s.token(0)).open() for k, s in stacks.items()}
    out: dict[str, Any] = {}
    try:
        for _ in range(warmup):
            for k in stacks:
                await sessions[k].request(message, EXPECT[path])
        before = {k: cpu_snapshot(s.pids()) for k, s in stacks.items()}
        nats = {k: s.nats_counters() for k, s in stacks.items()}
        calls = {k: sum(s.model.calls().values()) for k, s in stacks.items()}
        latencies: dict[str, list[float]] = {k: [] for k in stacks}
        errors = dict.fromkeys(stacks, 0)
        for i in range(n):
            for k in stacks if i % 2 == 0 else reversed(list(stacks)):
                if i % TURNS == 0:
                    sessions[k].new_session()
                got = await sessions[k].request(message, EXPECT[path])
                if got.error:
                    errors[k] += 1
                else:
                    latencies[k].append(got.latency_ms)
        for k, s in stacks.items():
            after = s.nats_counters()
            out[k] = {
                "cpu": cpu_ms_per(before[k], cpu_snapshot(s.pids()), n),
                "p50": round(statistics.median(latencies[k]), 2) if latencies[k] else None,
                "errors": errors[k],
                "msgs_in": round((after["in_msgs"] - nats[k]["in_msgs"]) / n, 1),
                "model_calls": round((sum(s.model.calls().values()) - calls[k]) / n, 2),
            }
    finally:
        for session in sessions.values():
            await session.close()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__)
    p.add_argument("a", help="git ref, or WORKTREE")
    p.add_argument("b", help="git ref, or WORKTREE")
    p.add_argument("--requests", type=int, default=300, help="per path and side")
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--paths", default=",".join(PATHS))
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="sidekick-ab-"))
    stacks: dict[str, Stack] = {}
    started = time.monotonic()
    load_start = "/".join(f"{x:.1f}" for x in os.getloadavg())
    try:
        for side, ref in (("A", args.a), ("B", args.b)):
            tree = export(ref, work / side)
            stacks[side] = Stack(max_concurrency=1024, principals=1, root=tree).start()
            stacks[side].model.configure(latency_ms=0, token_gap_ms=0)
        results = {
            path: run_loop(paired(stacks, path, args.requests, args.warmup))
            for path in args.paths.split(",")
        }
    finally:
        for stack in stacks.values():
            stack.stop()
        shutil.rmtree(work, ignore_errors=True)
    load_end = "/".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"A = {args.a}, B = {args.b}; {args.requests} requests per path and side, in turn; "
        f"load {load_start} -> {load_end}; {time.monotonic() - started:.0f} s"
    )
    for path, sides in results.items():
        a, b = sides["A"], sides["B"]
        print(f"\n{path}")
        print(f"  {'figure':<24}{'A':>10}{'B':>10}{'B/A':>8}")
        rows = [(f"cpu ms: {proc}", a["cpu"][proc], b["cpu"].get(proc)) for proc in a["cpu"]]
        rows += [(key, a[key], b[key]) for key in ("p50", "msgs_in", "model_calls", "errors")]
        for name, x, y in rows:
            ratio = f"{y / x:.2f}" if x and y is not None else "-"
            print(
                f"  {name:<24}{x if x is not None else '-':>10}{y if y is not None else '-':>10}"
                f"{ratio:>8}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
