"""Figures per mode, the price table, the printed tables, the JSON file and comparing runs.

A case's cost is the system's own (its end frame's `cost_usd`: the same accounting as its
budgets). With --prices, or for an end that carries no cost (a failure, or an older system),
the eval prices it itself: each model's tokens at its price, the end frame's `usage.models`
saying which models answered and with how many tokens; a system that does not say is priced as
its `usage.model`, else the model given with --model. Prices are US dollars per million tokens;
a model missing from the table has no cost (shown as "?"), never a made-up one. Usage the
system counted itself (a server reported none) is an estimate, and marked so."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from services.evals.runner import MODES, CaseRun
from services.runtime.base.errors import SidekickError
from services.runtime.budgets.prices import PRICES as LIST_PRICES

FORMAT_VERSION = 1
# Public list prices (USD per 1M tokens: input, output) as of 2025: the budgets' table
# (services/runtime/budgets/prices.py) and two more models to evaluate; override with --prices.
PRICES: dict[str, tuple[float, float]] = {
    **LIST_PRICES,
    "o4-mini": (1.10, 4.40),
    "o3-mini": (1.10, 4.40),
}
# What the table shows, in order: (key, label, format, better when higher).
METRICS: list[tuple[str, str, str, bool | None]] = [
    ("pass_rate", "pass rate", "pct", True),
    ("passed", "cases passed", "int", True),
    ("cases", "cases run", "int", None),
    ("mean_attempts", "mean attempts", "2f", None),
    ("mean_score", "mean evaluator score", "1f", True),
    ("judge_pass_rate", "judge pass rate", "pct", True),
    ("input_tokens", "tokens in", "int", False),
    ("output_tokens", "tokens out", "int", False),
    ("cost_usd", "cost (USD)", "usd", False),
    ("estimated", "cases with estimated usage", "int", None),
    ("p50_latency_s", "latency p50 (s)", "2f", False),
    ("p95_latency_s", "latency p95 (s)", "2f", False),
    ("unfinished", "timeouts / unreachable", "int", False),
]


class PricesError(SidekickError):
    pass


def load_prices(path: Path | None) -> dict[str, tuple[float, float]]:
    """The built-in table, with a JSON file's entries over it:
    `{"model": {"input": 0.15, "output": 0.6}, ...}` (USD per million tokens)."""
    prices = dict(PRICES)
    if path is None:
        return prices
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        for model, p in raw.items():
            prices[str(model)] = (float(p["input"]), float(p["output"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise PricesError(
            f'{path}: expected {{"model": {{"input": USD/1M, "output": USD/1M}}}}: {exc}'
        ) from exc
    return prices


def cost_of(
    run: CaseRun, model: str, prices: Mapping[str, tuple[float, float]], reprice: bool = False
) -> float | None:
    """The system's cost of the case; the table's when `reprice` (--prices) or it gave none."""
    if run.cost_usd is not None and not reprice:
        return run.cost_usd
    used = run.models or {run.model or model: (run.input_tokens, run.output_tokens)}
    total = 0.0
    for name, (tokens_in, tokens_out) in used.items():
        price = prices.get(name)
        if price is None:
            return None
        total += (tokens_in * price[0] + tokens_out * price[1]) / 1_000_000
    return total


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def mean(values: Iterable[float]) -> float | None:
    items = list(values)
    return sum(items) / len(items) if items else None


def summarize(
    runs: list[CaseRun],
    model: str,
    prices: Mapping[str, tuple[float, float]],
    reprice: bool = False,
) -> dict[str, Any]:
    """One mode's figures. Attempts and scores are averaged over the runs that have them
    (a direct answer makes no attempt; single-shot has no evaluator score)."""
    costs = [cost_of(r, model, prices, reprice) for r in runs]
    judged = [r for r in runs if r.judge is not None]
    kinds: dict[str, list[int]] = {}
    for r in runs:
        tally = kinds.setdefault(r.case.kind, [0, 0])
        tally[0] += int(r.passed)
        tally[1] += 1
    return {
        "cases": len(runs),
        "passed": sum(r.passed for r in runs),
        "pass_rate": sum(r.passed for r in runs) / len(runs) if runs else None,
        "mean_attempts": mean(r.attempts for r in runs if r.attempts),
        "mean_score": mean(r.score for r in runs if r.score is not None),
        "judge_pass_rate": mean(float(bool(r.judge and r.judge.get("passed"))) for r in judged),
        "input_tokens": sum(r.input_tokens for r in runs),
        "output_tokens": sum(r.output_tokens for r in runs),
        "cost_usd": None if any(c is None for c in costs) else sum(c for c in costs if c),
        "estimated": sum(r.estimated for r in runs),
        "p50_latency_s": percentile([r.latency_s for r in runs], 50),
        "p95_latency_s": percentile([r.latency_s for r in runs], 95),
        "unfinished": sum(r.outcome.status in ("timeout", "unreachable") for r in runs),
        "by_kind": {k: {"passed": p, "cases": n} for k, (p, n) in sorted(kinds.items())},
    }


def result_dict(
    run: CaseRun, model: str, prices: Mapping[str, tuple[float, float]], reprice: bool = False
) -> dict[str, Any]:
    out = run.outcome
    return {
        "case": run.case.id,
        "kind": run.case.kind,
        "mode": run.mode,
        "passed": run.passed,
        "status": out.status,
        "route": out.route,
        "worker_type": out.worker_type,
        "attempts": run.attempts,
        "score": run.score,
        "latency_s": round(run.latency_s, 3),
        "input_tokens": run.input_tokens,
        "output_tokens": run.output_tokens,
        "model": ", ".join(run.models) or run.model or model,
        "models": {m: {"input_tokens": i, "output_tokens": o} for m, (i, o) in run.models.items()},
        "cost_usd": cost_of(run, model, prices, reprice),
        "usage_estimated": run.estimated,
        "sources": list(out.sources),
        "questions": out.questions,
        "outbox": out.outbox,
        "error_code": out.error_code,
        "error": out.error,
        "checks": [asdict(c) for c in run.checks],
        "judge": run.judge,
        "answer": out.text[:4000],
    }


def report(
    runs: list[CaseRun],
    *,
    model: str,
    prices: Mapping[str, tuple[float, float]],
    meta: dict[str, Any],
    reprice: bool = False,
) -> dict[str, Any]:
    """`reprice`: every case at `prices` (--prices), not at the system's own cost."""
    modes = [m for m in MODES if any(r.mode == m for r in runs)]
    summary = {
        m: summarize([r for r in runs if r.mode == m], model, prices, reprice) for m in modes
    }
    return {
        "format": FORMAT_VERSION,
        **meta,
        "model": model,
        "priced_by": "the --prices table" if reprice else "the system (end frames' cost_usd)",
        "modes": modes,
        "summary": summary,
        "results": [result_dict(r, model, prices, reprice) for r in runs],
    }


def fmt(value: Any, how: str) -> str:
    """A figure as its row says (`how`): "pct", "int", "usd", or "2f"-style decimals."""
    if value is None:
        return "?" if how == "usd" else "—"
    return written(value, how, change=False)


def change(old: Any, new: Any, how: str) -> str:
    """New minus old, signed, in the figure's own way (percentages as points)."""
    if old is None or new is None:
        return ""
    return written(new - old, how, change=True)


def written(x: Any, how: str, *, change: bool) -> str:
    sign = "+" if change else ""
    if how == "pct":
        return f"{x * 100:{sign}.1f}" + (" pts" if change else "%")
    if how == "int":
        return f"{int(x):{sign},}"
    if how == "usd":
        return f"{x:+.4f}" if change else f"${x:.4f}"
    return f"{x:{sign}.{how[0]}f}"


def table(data: dict[str, Any]) -> Table:
    """Metric rows, a column per mode, and loop minus single when both ran."""
    modes: list[str] = data["modes"]
    cases = Path(str(data.get("cases_file", ""))).name
    if data.get("priced_by", "").startswith("the system"):
        priced = "cost as the system priced it"
    else:
        priced = f"priced per answering model (else as {data['model']})"
    t = Table(title=f"sidekick eval · {cases} · {priced}")
    t.add_column("metric")
    for m in modes:
        t.add_column("evaluator loop" if m == "loop" else "single-shot", justify="right")
    both = modes == ["loop", "single"]
    if both:
        t.add_column("loop - single", justify="right")
    for key, label, how, _ in METRICS:
        values = [data["summary"][m].get(key) for m in modes]
        row = [label, *(fmt(v, how) for v in values)]
        if both:
            row.append(change(values[1], values[0], how))
        t.add_row(*row)
    kinds = sorted({k for m in modes for k in data["summary"][m]["by_kind"]})
    for kind in kinds:
        cells = []
        for m in modes:
            k = data["summary"][m]["by_kind"].get(kind)
            cells.append(f"{k['passed']}/{k['cases']}" if k else "—")
        t.add_row(f"passed: {kind}", *cells, *([""] if both else []))
    return t


def comparison(old: dict[str, Any], new: dict[str, Any]) -> Table:
    """Each metric of each mode both runs have: old, new and the change."""
    t = Table(title=f"compared with {old.get('started_at', 'the old run')} ({old.get('model')})")
    t.add_column("mode")
    t.add_column("metric")
    t.add_column("old", justify="right")
    t.add_column("new", justify="right")
    t.add_column("change", justify="right")
    for m in [m for m in new["modes"] if m in old.get("modes", [])]:
        for key, label, how, _ in METRICS:
            a, b = old["summary"][m].get(key), new["summary"][m].get(key)
            t.add_row(m, label, fmt(a, how), fmt(b, how), change(a, b, how))
    return t


def changed_cases(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Cases whose pass/fail flipped between the runs, one line each."""
    before = {(r["case"], r["mode"]): r["passed"] for r in old.get("results", [])}
    lines = []
    for r in new["results"]:
        was = before.get((r["case"], r["mode"]))
        if was is not None and was != r["passed"]:
            verb = "now passes" if r["passed"] else "now fails"
            lines.append(f"{r['case']} ({r['mode']}) {verb}")
    return lines


def load_report(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PricesError(f"cannot read the earlier run {path}: {exc}") from exc
    if data.get("format") != FORMAT_VERSION or "summary" not in data:
        raise PricesError(f"{path} is not a `sidekick eval --json` file")
    return data


def costs(data: dict[str, Any]) -> Table:
    """Each case's tokens and cost, "(estimated)" where the system counted the usage itself."""
    t = Table(title="cost per case")
    for column in ("case", "mode", "status", "tokens in", "tokens out", "cost (USD)"):
        t.add_column(column, justify="left" if column in ("case", "mode", "status") else "right")
    for r in data["results"]:
        cost = "?" if r["cost_usd"] is None else f"${r['cost_usd']:.6f}"
        cost += " (estimated)" if r.get("usage_estimated") else ""
        tokens = (fmt(r["input_tokens"], "int"), fmt(r["output_tokens"], "int"))
        t.add_row(r["case"], r["mode"], r["status"], *tokens, cost)
    return t


def print_report(console: Console, data: dict[str, Any], old: dict[str, Any] | None) -> None:
    console.print(costs(data))
    console.print(table(data))
    if old is not None:
        console.print(comparison(old, data))
        for line in changed_cases(old, data):
            console.print(f"  {line}")
