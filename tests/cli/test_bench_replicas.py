"""`python -m bench --replicas N --gateways G` runs N processes of every service and G
gateways, spreads the sessions over the gateways and reports, per level, the stuck sessions,
CPU per request per process and the busiest processes. A smoke run checks the shape and that
no session got stuck; its speed is not asserted (timing goals live in bench/)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.harness import ROOT


def test_a_quick_bench_with_two_replicas_of_everything_gets_no_session_stuck(
    tmp_path: Path,
) -> None:
    argv = ["--quick", "--only", "concurrency", "--replicas", "2", "--gateways", "2"]
    proc = subprocess.run(
        [sys.executable, "-m", "bench", *argv, "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "### Scale-out (2 process(es) of every service, 2 gateway(s)" in proc.stdout
    results = json.loads((tmp_path / "latest.json").read_text())
    assert results["meta"]["config"]["replicas"] == 2
    for level in results["concurrency"]["levels"].values():
        assert level["stuck"] == 0 and level["errors"] == 0, level["error_kinds"]
        assert level["completed"] > 0
        busy = level["cores_busy_by_process"]
        for name in ("orchestrator", "orchestrator.2", "workers.2", "gateway"):
            assert name in busy, busy
        assert any(name.startswith("gateway:") for name in busy), "a second gateway ran"
        assert level["cpu_ms_per_request"]["sidekick"] > 0


def test_the_bench_refuses_replicas_below_one() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--replicas", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "--replicas and --gateways take 1 or more" in proc.stderr
