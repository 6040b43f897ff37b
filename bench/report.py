"""Turning the bench's results into ratios, a verdict against each target, and tables."""

from __future__ import annotations

from typing import Any

TARGETS_NOTE = "Targets are goals for one 2-core machine with every process local; not asserted."


def _get(d: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(d, dict) or key not in d:
            return None
        d = d[key]
    return d


def ratios(results: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"overhead_p50_vs_floor": {}, "throughput_vs_langgraph": {}}
    for path in ("direct", "orchestrated_1", "orchestrated_3"):
        ours = _get(results, "overhead", path, "p50")
        floor = _get(results, "floor", path, "p50")
        if ours and floor:
            out["overhead_p50_vs_floor"][path] = round(ours / floor, 2)
    for level, ours in (_get(results, "concurrency", "levels") or {}).items():
        theirs = _get(results, "langgraph", "levels", level, "rps")
        if theirs:
            out["throughput_vs_langgraph"][level] = round(ours["rps"] / theirs, 3)
    return out


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target (issue 12) with the figure measured for it (None when that part did not
    run)."""
    rows: list[dict[str, Any]] = []

    def row(name: str, measured: Any, target: str, met: bool | None, unit: str = "") -> None:
        shown = "not run" if measured is None else f"{measured}{unit}"
        rows.append({"figure": name, "measured": shown, "target": target, "met": met})

    def at_most(value: Any, limit: float) -> bool | None:
        return None if value is None else bool(value <= limit)

    d = _get(results, "overhead", "direct") or {}
    calls = d.get("model_calls_per_request")
    row("model calls for a direct answer", calls, "1", at_most(calls, 1))
    cpu = _get(d, "cpu_ms_per_request", "sidekick")
    row("direct: CPU per request (all processes)", cpu, "≤ 5 ms", at_most(cpu, 5), " ms")
    row("direct: p50", d.get("p50"), "≤ 5 ms", at_most(d.get("p50"), 5), " ms")
    o1 = _get(results, "overhead", "orchestrated_1") or {}
    cpu = _get(o1, "cpu_ms_per_request", "sidekick")
    row("orchestrated, 1 attempt: CPU per request", cpu, "≤ 10 ms", at_most(cpu, 10), " ms")
    row("orchestrated, 1 attempt: p50", o1.get("p50"), "≤ 12 ms", at_most(o1.get("p50"), 12), " ms")
    row("orchestrated, 1 attempt: p99", o1.get("p99"), "≤ 40 ms", at_most(o1.get("p99"), 40), " ms")
    msgs = _get(o1, "nats_msgs_per_request", "in_msgs")
    row("NATS messages per orchestrated request (in)", msgs, "≤ 25", at_most(msgs, 25))
    ft = _get(results, "streaming", "first_token_added_ms", "p50")
    row("first token → first frame: p50", ft, "≤ 1.5 ms", at_most(ft, 1.5), " ms")

    levels = _get(results, "concurrency", "levels") or {}
    if levels:
        top = max(levels, key=int)
        lv = levels[top]
        row(f"{top} sessions: errors", lv["errors"], "0", lv["errors"] == 0)
        row(
            f"{top} sessions: share of the model-bound ideal",
            f"{lv['of_ideal'] * 100:.1f}% ({lv['rps']} of {lv['ideal_rps']} rps)",
            "≥ 35%",
            lv["of_ideal"] >= 0.35,
        )
        theirs = _get(results, "langgraph", "levels", top, "rps")
        row(
            f"{top} sessions: throughput vs LangGraph",
            None
            if theirs is None
            else f"{lv['rps']} vs {theirs} rps ({_times(lv['rps'], theirs)})",
            "≥ 3 x",
            None if theirs is None else lv["rps"] >= 3 * theirs,
        )
        low = levels.get("50")
        if low is not None:
            row(
                "50 sessions: share of the model-bound ideal",
                f"{low['of_ideal'] * 100:.1f}%",
                "≥ 97%",
                low["of_ideal"] >= 0.97,
            )
    else:
        row("concurrency", None, "—", None)
    rec = _get(results, "recovery", "victims") or {}
    for victim, f in rec.items():
        done = f.get("all_done_after_s")
        row(
            f"{f['in_flight']} requests in flight, {victim} SIGKILLed: all done after",
            "not all" if done is None else done,
            "≤ 10 s",
            None if done is None and not f else (done is not None and done <= 10),
            "" if done is None else " s",
        )
    idle = results.get("idle") or {}
    rss = idle.get("gateway_rss_mib")
    row(
        f"{idle.get('sockets', 5000)} idle sockets: gateway RSS",
        rss,
        "< 200 MiB",
        None if rss is None else rss < 200,
        " MiB",
    )
    return rows


def md_table(headers: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join("" if c is None else str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def _mark(met: bool | None) -> str:
    return {True: "✅ met", False: "❌ missed", None: "—"}[met]


def _times(ours: float, theirs: float) -> str:
    """How many times `theirs` is `ours` (LangGraph may finish nothing in a window)."""
    return f"{ours / theirs:.2f} x" if theirs else "they completed none"


def render(results: dict[str, Any]) -> str:
    """The whole report as Markdown (printed, and written to results/latest.md)."""
    meta = results["meta"]
    parts = [
        f"Sidekick bench — {meta['date']} — `{meta['command']}` at {meta.get('commit')}"
        + (
            " (QUICK: tiny counts, figures not comparable with the targets)"
            if meta["quick"]
            else ""
        ),
        f"Machine: {meta['cpus']} CPUs, Python {meta['python']}; load average (1/5/15 min) "
        f"at start {meta['load_start']}, at end {meta.get('load_end')}. {TARGETS_NOTE}",
        "",
        "### Targets",
        md_table(
            ["figure", "measured", "target", "verdict"],
            [
                [r["figure"], r["measured"], r["target"], _mark(r["met"])]
                for r in results["targets"]
            ],
        ),
    ]
    over = results.get("overhead") or {}
    floor = results.get("floor") or {}
    if over:
        rows = []
        for path, f in over.items():
            fl = floor.get(path) or {}
            rows.append(
                [
                    path,
                    f.get("n"),
                    f.get("p50"),
                    f.get("p95"),
                    f.get("p99"),
                    f.get("errors"),
                    f.get("model_calls_per_request"),
                    _get(f, "cpu_ms_per_request", "sidekick"),
                    "/".join(
                        str(_get(f, "nats_msgs_per_request", k)) for k in ("in_msgs", "out_msgs")
                    ),
                    fl.get("hops"),
                    fl.get("p50"),
                    fl.get("p99"),
                    _get(results, "ratios", "overhead_p50_vs_floor", path),
                ]
            )
        parts += [
            "",
            "### Overhead (instant model; ms from message frame to end frame)",
            md_table(
                [
                    "path",
                    "n",
                    "p50",
                    "p95",
                    "p99",
                    "errors",
                    "model calls/req",
                    "CPU ms/req",
                    "NATS msgs in/out per req",
                    "floor hops",
                    "floor p50",
                    "floor p99",
                    "p50 ÷ floor",
                ],
                rows,
            ),
        ]
    if over:
        procs = ["gateway", "frontline", "orchestrator", "evaluator", "workers", "nats-server"]
        procs += ["sidekick", "fake-model", "bench"]
        rows = []
        for path, f in over.items():
            cpu = f.get("cpu_ms_per_request") or {}
            fl = _get(floor, path, "cpu_ms_per_request", "total")
            rows.append([path, *(cpu.get(p) for p in procs), fl])
        parts += [
            "",
            "### CPU per request by process (ms; overhead part; sidekick = the five services "
            "and nats-server)",
            md_table(["path", *procs, "floor (relays + nats-server + driver)"], rows),
        ]
    st = results.get("streaming")
    if st:
        f = st["first_token_added_ms"]
        parts += [
            "",
            "### Streaming (ms from the model writing its first token to the client's first frame)",
            md_table(
                ["n", "p50", "p95", "p99", "max", "errors"],
                [
                    [
                        f.get("n"),
                        f.get("p50"),
                        f.get("p95"),
                        f.get("p99"),
                        f.get("max"),
                        st["errors"],
                    ]
                ],
            ),
        ]
    conc = results.get("concurrency")
    if conc:
        lg = _get(results, "langgraph", "levels") or {}
        rows = []
        for level, f in conc["levels"].items():
            g = lg.get(level) or {}
            rss = ", ".join(f"{k} {v}" for k, v in f["peak_rss_mib"].items())
            rows.append(
                [
                    level,
                    f["rps"],
                    f["ideal_rps"],
                    f"{f['of_ideal'] * 100:.1f}%",
                    f["errors"],
                    _get(f, "latency_ms", "p50"),
                    _get(f, "latency_ms", "p99"),
                    g.get("rps"),
                    g.get("errors"),
                    _get(g, "latency_ms", "p99"),
                    _get(results, "ratios", "throughput_vs_langgraph", level),
                    rss,
                ]
            )
        skipped = _get(results, "langgraph", "skipped")
        parts += [
            "",
            f"### Concurrency ({conc['path']}, {conc['model_calls_per_request']} model calls of "
            f"{conc['model_latency_ms']:.0f} ms per request; closed loop)"
            + (f" — LangGraph baseline skipped: {skipped}" if skipped else ""),
            md_table(
                [
                    "sessions",
                    "rps",
                    "ideal rps",
                    "of ideal",
                    "errors",
                    "p50 ms",
                    "p99 ms",
                    "LangGraph rps",
                    "LG errors",
                    "LG p99 ms",
                    "rps ÷ LG",
                    "peak RSS MiB (Sidekick)",
                ],
                rows,
            ),
        ]
    rec = results.get("recovery")
    if rec:
        rows = []
        for victim, f in rec["victims"].items():
            done = f.get("done_after_s") or {}
            rows.append(
                [
                    victim,
                    f["in_flight"],
                    f["ready_after_s"],
                    done.get("p50"),
                    f.get("all_done_after_s"),
                    f["errors"],
                ]
            )
        parts += [
            "",
            f"### Recovery (routed requests in flight when their holder is SIGKILLed and "
            f"restarted at once; ack wait {rec['ack_wait_s']:g} s; seconds from the kill)",
            md_table(
                ["victim", "in flight", "restarted, ready", "done p50", "all done", "errors"],
                rows,
            ),
        ]
    idle = results.get("idle")
    if idle:
        parts += [
            "",
            "### Idle sockets",
            md_table(
                ["sockets", "opened", "gateway RSS before", "with sockets", "peak", "per socket"],
                [
                    [
                        idle["sockets"],
                        idle["opened"],
                        f"{idle['gateway_rss_before_mib']} MiB",
                        f"{idle['gateway_rss_mib']} MiB",
                        f"{idle['gateway_peak_rss_mib']} MiB",
                        f"{idle['per_socket_kib']} KiB",
                    ]
                ],
            ),
        ]
    return "\n".join(parts) + "\n"
