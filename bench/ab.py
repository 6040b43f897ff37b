"""Interleaved A/B runs of the overhead bench: two versions of the code, run one after the
other, round after round, so that the load others put on the machine falls on both alike.
CPU milliseconds per request (what the processes spent, not the wall time they waited) is
the figure to decide by; p50 is shown beside it.

    python -m bench.ab main HEAD --rounds 3 --requests 300
    python -m bench.ab HEAD WORKTREE          # WORKTREE: the files as they are now

Each version is exported (`git archive`, or a copy of the work tree) to a temporary folder and
its own `python -m bench --only overhead` runs there, with this interpreter.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.system import ROOT

COPIED = ("bench", "contracts", "services", "pyproject.toml")


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


def run_once(tree: Path, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    cmd = [
        sys.executable,
        *("-m", "bench", "--only", args.only),
        *("--requests", str(args.requests), "--warmup", str(args.warmup)),
        *("--out", str(out)),
        *args.extra,
    ]
    env = {**os.environ, "BENCH_COMMIT": tree.name}
    proc = subprocess.run(cmd, cwd=tree, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"bench failed in {tree}:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads((out / "latest.json").read_text())
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__)
    p.add_argument("a", help="git ref, or WORKTREE")
    p.add_argument("b", help="git ref, or WORKTREE")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--requests", type=int, default=300)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--only", default="overhead")
    p.add_argument("extra", nargs="*", help="more arguments for python -m bench (after --)")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="sidekick-ab-"))
    trees = {"A": export(args.a, work / "A"), "B": export(args.b, work / "B")}
    figures: dict[str, dict[str, dict[str, list[float]]]] = {"A": {}, "B": {}}
    try:
        for r in range(args.rounds):
            order = ("A", "B") if r % 2 == 0 else ("B", "A")
            for side in order:
                load = "/".join(f"{x:.1f}" for x in os.getloadavg())
                res = run_once(trees[side], args, work / f"out-{side}-{r}")
                for path, f in (res.get("overhead") or {}).items():
                    per = figures[side].setdefault(path, {})
                    for proc, ms in f["cpu_ms_per_request"].items():
                        per.setdefault(f"cpu:{proc}", []).append(ms)
                    per.setdefault("p50", []).append(f["p50"])
                    per.setdefault("msgs_in", []).append(f["nats_msgs_per_request"]["in_msgs"])
                    per.setdefault("model_calls", []).append(f["model_calls_per_request"])
                summary = {
                    p: v["cpu_ms_per_request"]["sidekick"] for p, v in res["overhead"].items()
                }
                print(f"round {r + 1} {side} (load {load}): CPU ms/req {summary}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nA = {args.a}, B = {args.b}; medians of {args.rounds} rounds")
    for path in figures["A"]:
        print(f"\n{path}")
        print(f"  {'figure':<22}{'A':>10}{'B':>10}{'B/A':>8}")
        for key in figures["A"][path]:
            a = statistics.median(figures["A"][path][key])
            b = statistics.median(figures["B"].get(path, {}).get(key, [float("nan")]))
            ratio = f"{b / a:.2f}" if a else "-"
            print(f"  {key:<22}{a:>10.2f}{b:>10.2f}{ratio:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
