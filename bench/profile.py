"""Where the CPU goes, per service: start the bench's system, drive one path with a closed loop
of sessions for a while, and record each service with py-spy meanwhile (one folded-stack file
per process, plus a table of the top functions by own samples and by cumulative samples).

    python -m bench.profile --path direct --seconds 20 --sessions 4 --out /tmp/prof

Folded stacks (`<service>.folded`) open in speedscope or inferno/flamegraph.pl. py-spy must be
installed (`pip install -e ".[bench]"`) and allowed to read other processes (root, or
ptrace_scope 0).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from bench.client import EXPECT, PATHS, Session
from bench.system import Stack, cpu_ms_per, cpu_snapshot
from services.runtime.base.children import SERVICES
from services.runtime.base.eventloop import run_loop


async def drive(stack: Stack, path: str, sessions: int, seconds: float) -> dict[str, int]:
    message = PATHS[path][0]
    done: Counter[str] = Counter()
    deadline = time.monotonic() + seconds

    async def loop(k: int) -> None:
        session = await Session(stack.ws_url, stack.token(k)).open()
        try:
            n = 0
            while time.monotonic() < deadline:
                if n % 10 == 0:
                    session.new_session()
                out = await session.request(message, EXPECT[path])
                done[out.error or "ok"] += 1
                n += 1
        finally:
            await session.close()

    await asyncio.gather(*(loop(k) for k in range(sessions)))
    return dict(done)


def top(folded: Path, n: int = 25) -> str:
    """The heaviest frames of a folded-stack file: by own samples and by cumulative samples."""
    own: Counter[str] = Counter()
    cumulative: Counter[str] = Counter()
    total = 0
    for line in folded.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        k = int(count)
        total += k
        frames = stack.split(";")
        own[frames[-1]] += k
        for frame in set(frames):
            cumulative[frame] += k
    lines = [f"{total} samples"]
    lines.append("  own%   frame")
    lines += [f"  {100 * v / total:5.1f}  {f}" for f, v in own.most_common(n)]
    lines.append("  cum%   frame")
    lines += [f"  {100 * v / total:5.1f}  {f}" for f, v in cumulative.most_common(n)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__)
    p.add_argument("--path", default="direct", choices=sorted(PATHS))
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--sessions", type=int, default=4)
    p.add_argument("--services", default=",".join(SERVICES))
    p.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    p.add_argument("--out", type=Path, default=Path("/tmp/sidekick-profile"))
    args = p.parse_args(argv)
    spy = shutil.which("py-spy")
    if spy is None:
        raise SystemExit('py-spy is not installed: pip install -e ".[bench]"')
    args.out.mkdir(parents=True, exist_ok=True)
    stack = Stack(max_concurrency=1024, principals=args.sessions).start()
    try:
        stack.model.configure(latency_ms=0, token_gap_ms=0)
        run_loop(drive(stack, args.path, args.sessions, 2.0))  # warm up
        spies = {}
        for name in args.services.split(","):
            pid = stack.procs[name].pid
            spies[name] = subprocess.Popen(
                [
                    *(spy, "record", "-p", str(pid), "-r", str(args.rate), "-f", "raw"),
                    *("--nonblocking", "-d", str(int(args.seconds) + 1)),
                    *("-o", str(args.out / f"{name}.folded")),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        before = cpu_snapshot(stack.pids())
        started = time.monotonic()
        done = run_loop(drive(stack, args.path, args.sessions, args.seconds))
        took = time.monotonic() - started
        n = sum(done.values())
        cpu = cpu_ms_per(before, cpu_snapshot(stack.pids()), n)
        for proc in spies.values():
            proc.wait(60)
    finally:
        stack.stop()
    print(f"{args.path}: {n} requests in {took:.1f}s ({done}); CPU ms per request: {cpu}")
    for name in spies:
        folded = args.out / f"{name}.folded"
        if folded.exists():
            report = top(folded)
            (args.out / f"{name}.top.txt").write_text(report + "\n")
            print(f"--- {name}\n{report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
