"""The benchmark suite runs end to end in quick mode and reports every figure in the documented
shape. Timings are not asserted here: timing goals live in bench/ (see docs/benchmarks.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PATHS = ("direct", "orchestrated_1", "orchestrated_3")


def _latencies_are_ordered(figures: dict[str, Any]) -> None:
    assert figures["n"] > 0
    assert 0 < figures["p50"] <= figures["p95"] <= figures["p99"] <= figures["max"]


def test_quick_bench_prints_a_table_and_json_with_every_figure(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    for heading in (
        "### Targets",
        "### Overhead",
        "### CPU per request by process",
        "### Streaming",
        "### Concurrency",
        "### Idle",
        "### Recovery",
    ):
        assert heading in proc.stdout
    assert (tmp_path / "latest.md").read_text().startswith("Sidekick bench")
    results = json.loads((tmp_path / "latest.json").read_text())
    assert results["meta"]["quick"] is True
    assert results["meta"]["load_start"] and results["meta"]["load_end"]

    for path in PATHS:
        over = results["overhead"][path]
        _latencies_are_ordered(over)
        assert over["errors"] == 0, over["error_kinds"]
        # The fake model was driven down the intended path (3 attempts = 8 model calls).
        assert over["model_calls_per_request"] >= over["expected_model_calls"]
        assert over["cpu_ms_per_request"]["sidekick"] > 0
        assert {"gateway", "frontline", "orchestrator", "evaluator", "workers", "nats-server"} <= (
            set(over["cpu_ms_per_request"])
        )
        floor = results["floor"][path]
        _latencies_are_ordered(floor)
        assert floor["errors"] == 0
        assert floor["cpu_ms_per_request"]["total"] > 0
        assert results["ratios"]["overhead_p50_vs_floor"][path] > 0

    streaming = results["streaming"]
    assert streaming["errors"] == 0
    _latencies_are_ordered(streaming["first_token_added_ms"])

    levels = results["concurrency"]["levels"]
    assert list(levels) == ["4", "16"]
    for level in levels.values():
        assert level["errors"] == 0, level["error_kinds"]
        assert level["completed"] > 0 and level["rps"] > 0 and level["ideal_rps"] > 0
        _latencies_are_ordered(level["latency_ms"])
        assert {
            "gateway",
            "frontline",
            "orchestrator",
            "evaluator",
            "workers",
            "nats-server",
        } <= set(level["peak_rss_mib"])

    langgraph = results["langgraph"]
    if "skipped" in langgraph:  # the bench extra is not installed
        assert "langgraph" in langgraph["skipped"]
    else:
        assert set(langgraph["levels"]) == set(levels)
        assert set(results["ratios"]["throughput_vs_langgraph"]) == set(levels)

    idle = results["idle"]
    assert idle["opened"] == idle["sockets"] == 50
    assert idle["gateway_rss_mib"] > 0

    recovery = results["recovery"]
    for victim in ("orchestrator", "workers"):
        got = recovery["victims"][victim]
        assert got["errors"] == 0, got["error_kinds"]
        assert got["completed"] == got["in_flight"] == 4, "every request in flight completed"
        # The restarted process may finish requests before restart() has seen it ready (it
        # polls), so both figures only count from the kill.
        assert got["ready_after_s"] > 0 and got["all_done_after_s"] > 0

    verdicts = {row["figure"]: row["met"] for row in results["targets"]}
    for figure in (
        "orchestrated, 1 attempt: p50",
        "orchestrated, 1 attempt: CPU per request",
        "direct: p50",
        "model calls for a direct answer",
        "first token → first frame: p50",
        "4 requests in flight, orchestrator SIGKILLed: all done after",
    ):
        assert verdicts[figure] in (True, False)
