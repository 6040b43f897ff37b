"""Write Sidekick's Grafana dashboards (deploy/grafana/dashboards/*.json).

The JSON files are what Grafana imports; this script is where they are edited, so that the
seven dashboards share one layout, one datasource variable and one set of conventions. After
changing it, run `python deploy/grafana/generate.py`; `--check` (run by tests/test_deploy.py)
fails when the committed JSON and this script disagree.

Conventions: every panel reads from the `${datasource}` variable (a Prometheus data source
picked on the dashboard); `job` is the service (gateway, frontline, orchestrator, evaluator,
worker), as the PodMonitor in deploy/k8s sets it; `$namespace` narrows to one deployment.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from panels import Panel, dashboard, pass_rate, q, quantile, quote, stat, total, ts

OUT = Path(__file__).resolve().parent / "dashboards"

REQ = "sidekick_requests_total"
REQ_TIME = "sidekick_request_duration_seconds"
ATTEMPTS = "sidekick_request_attempts"
SCORE = "sidekick_evaluator_score"
LLM_TIME = "sidekick_llm_request_duration_seconds"
DEAD = "sidekick_dead_letters_total"
FAILED = 'outcome="failed"'
WORK = 'stream_name=~".+_WORK"'
DL_SEQ = 'nats_stream_last_seq{stream_name=~".+_DEADLETTER"}'


def llm_panels(role: str | None) -> list[Panel]:
    m = [f'role="{role}"'] if role else []
    by = "model" if role else "role, model"
    legend = "{{model}}" if role else "{{role}} {{model}}"
    return [
        ts(
            "Model latency p50 / p95",
            (quantile(0.5, LLM_TIME, by, *m), f"p50 {legend}"),
            (quantile(0.95, LLM_TIME, by, *m), f"p95 {legend}"),
            unit="s",
            w=8,
        ),
        ts(
            "Tokens / s by model",
            (total("sidekick_llm_tokens_total", "model, direction", *m), "{{model}} {{direction}}"),
            w=8,
        ),
        ts(
            "Model errors / s (after retries)",
            (total("sidekick_llm_errors_total", f"{by}, error", *m), f"{legend} {{{{error}}}}"),
            unit="reqps",
            w=8,
        ),
    ]


def messaging_panels(job: str) -> list[Panel]:
    """The bus as one service sees it: its durable consumers' messages and handlers, and
    readiness (services/runtime/bus.py)."""
    j = f'job="{job}"'
    return [
        ts(
            "Messages handled / s by consumer and result",
            (
                total("sidekick_bus_messages_total", "consumer, result", j),
                "{{consumer}} {{result}}",
            ),
            unit="ops",
            w=8,
        ),
        ts(
            "Handler duration p95",
            (
                quantile(0.95, "sidekick_bus_handler_duration_seconds", "consumer", j),
                "{{consumer}}",
            ),
            unit="s",
            w=8,
        ),
        ts(
            "Messages in progress",
            (
                f"sum by (consumer) ({q('sidekick_bus_messages_in_progress', j)})",
                "{{consumer}}",
            ),
            w=8,
        ),
        ts(
            "Ready replicas",
            (f"sum({q('sidekick_ready', j)})", "ready"),
            (f"count({q('sidekick_ready', j)})", "running"),
            w=8,
        ),
    ]


def lag_panel(consumers: str, title: str = "JetStream backlog") -> Panel:
    sel = f'{WORK}, consumer_name=~"{consumers}"'
    return Panel(
        title,
        [
            (
                f"max by (consumer_name) (nats_consumer_num_pending{{{sel}}})",
                "pending {{consumer_name}}",
            ),
            (
                f"max by (consumer_name) (nats_consumer_num_ack_pending{{{sel}}})",
                "in flight {{consumer_name}}",
            ),
        ],
        description="Messages not yet delivered (pending) and delivered but not acknowledged "
        "(in flight) on the service's durable consumers, from the NATS exporter.",
    )


def overview() -> dict[str, Any]:
    failed = f"{total(REQ, '', FAILED)} / {total(REQ)}"
    ready_gateways = f"sum({q('sidekick_ready', 'job=' + quote('gateway'))})"
    hits = total("sidekick_cache_lookups_total", "", 'result="hit"')
    lookups = total("sidekick_cache_lookups_total", "", 'result=~"hit|miss"')
    mean_attempts = f"{total(ATTEMPTS + '_sum')} / {total(ATTEMPTS + '_count')}"
    return dashboard(
        "sidekick-overview",
        "Sidekick / Overview",
        "Requests, outcomes, latency, attempts, evaluator pass rate and model usage.",
        [
            (
                "Now",
                [
                    stat("Requests / s", total(REQ), "reqps"),
                    stat("Failed", failed, "percentunit"),
                    stat("Evaluator pass rate", pass_rate(), "percentunit"),
                    stat("p95 latency", quantile(0.95, REQ_TIME), "s"),
                    stat("Open WebSockets", f"sum({q('sidekick_gateway_websocket_connections')})"),
                    stat("Ready gateways", ready_gateways),
                ],
            ),
            (
                "Requests",
                [
                    ts(
                        "Requests / s by outcome",
                        (total(REQ, "outcome"), "{{outcome}}"),
                        unit="reqps",
                        w=8,
                    ),
                    ts(
                        "Requests / s by route",
                        (total(REQ, "route"), "{{route}}"),
                        unit="reqps",
                        w=8,
                    ),
                    ts(
                        "Request latency p50 / p95 (accepted to terminal)",
                        (quantile(0.5, REQ_TIME), "p50"),
                        (quantile(0.95, REQ_TIME), "p95"),
                        unit="s",
                        w=8,
                    ),
                ],
            ),
            (
                "Attempts and evaluation",
                [
                    ts(
                        "Attempts per orchestrated request",
                        (mean_attempts, "mean"),
                        (quantile(0.95, ATTEMPTS), "p95"),
                        w=8,
                    ),
                    ts(
                        "Evaluator pass rate by worker type",
                        (pass_rate("worker_type"), "{{worker_type}}"),
                        unit="percentunit",
                        w=8,
                    ),
                    ts(
                        "Evaluator score p50 by worker type",
                        (quantile(0.5, SCORE, "worker_type"), "{{worker_type}}"),
                        w=8,
                    ),
                ],
            ),
            ("Models", llm_panels(None)),
            (
                "Health",
                [
                    ts(
                        "Dead letters (15 min) by source",
                        (f"sum by (source) (increase({q(DEAD)}[15m]))", "{{source}}"),
                        w=8,
                    ),
                    ts(
                        "Semantic cache hit rate",
                        (f"{hits} / {lookups}", "hit rate"),
                        unit="percentunit",
                        w=8,
                    ),
                    ts(
                        "Clarifications and cancellations / s",
                        (total("sidekick_clarifications_total"), "clarifications"),
                        (total("sidekick_cancellations_total"), "cancellations"),
                        unit="reqps",
                        w=8,
                    ),
                    lag_panel(".+", "JetStream backlog by consumer"),
                    ts(
                        "Ready replicas by service",
                        (f"sum by (job) ({q('sidekick_ready')})", "{{job}}"),
                    ),
                ],
            ),
        ],
    )


def gateway() -> dict[str, Any]:
    sockets = f"sum by (pod) ({q('sidekick_gateway_websocket_connections')})"
    rejected = total("sidekick_gateway_frames_rejected_total", "reason")
    return dashboard(
        "sidekick-gateway",
        "Sidekick / Gateway",
        "The WebSocket and HTTP entry point.",
        [
            (
                "Clients",
                [
                    ts("Open WebSockets by pod", (sockets, "{{pod}}")),
                    ts(
                        "Rejected client frames / s by reason", (rejected, "{{reason}}"), unit="ops"
                    ),
                    ts(
                        "Client-bound events heard / s by kind",
                        (
                            total("sidekick_gateway_events_total", "kind", 'job="gateway"'),
                            "{{kind}}",
                        ),
                        unit="ops",
                    ),
                ],
            ),
            ("Messaging", messaging_panels("gateway")),
        ],
    )


def frontline() -> dict[str, Any]:
    direct = total(REQ, "outcome", 'route="direct"')
    return dashboard(
        "sidekick-frontline",
        "Sidekick / Frontline",
        "Direct answers and routing to the orchestrator.",
        [
            (
                "Answers",
                [
                    ts("Direct answers / s by outcome", (direct, "{{outcome}}"), unit="reqps"),
                    ts(
                        "Cancellations / s seen by frontline",
                        (
                            total("sidekick_cancellations_total", "", 'service="frontline"'),
                            "cancels",
                        ),
                        unit="ops",
                    ),
                    lag_panel("sidekick_frontline"),
                ],
            ),
            ("Model", llm_panels("frontline")),
            ("Messaging", messaging_panels("frontline")),
        ],
    )


def orchestrator() -> dict[str, Any]:
    orchestrated = total(REQ, "outcome", 'route="orchestrated"')
    attempts = f"sum by (le) (increase({q(ATTEMPTS + '_bucket')}[1h]))"
    verdicts = total("sidekick_evaluator_verdicts_total", "worker_type, passed")
    attempts_panel = ts(
        "Requests in the last hour with at most N attempts", (attempts, "≤ {{le}}"), w=8
    )
    return dashboard(
        "sidekick-orchestrator",
        "Sidekick / Orchestrator",
        "Decisions and the attempt loop.",
        [
            (
                "Attempt loop",
                [
                    ts(
                        "Orchestrated requests / s by outcome",
                        (orchestrated, "{{outcome}}"),
                        unit="reqps",
                        w=8,
                    ),
                    attempts_panel,
                    ts(
                        "Verdicts / s",
                        (verdicts, "{{worker_type}} passed={{passed}}"),
                        unit="ops",
                        w=8,
                    ),
                    ts(
                        "Clarifications / s by source",
                        (total("sidekick_clarifications_total", "source"), "{{source}}"),
                        unit="ops",
                        w=8,
                    ),
                    ts(
                        "Semantic cache lookups / s by result",
                        (total("sidekick_cache_lookups_total", "result"), "{{result}}"),
                        unit="ops",
                        w=8,
                    ),
                    ts(
                        "Cancellations / s seen by the orchestrator",
                        (
                            total("sidekick_cancellations_total", "", 'service="orchestrator"'),
                            "cancels",
                        ),
                        unit="ops",
                        w=8,
                    ),
                    lag_panel("sidekick_orchestrator_.+"),
                ],
            ),
            ("Model", llm_panels("orchestrator")),
            ("Messaging", messaging_panels("orchestrator")),
        ],
    )


def evaluator() -> dict[str, Any]:
    return dashboard(
        "sidekick-evaluator",
        "Sidekick / Evaluator",
        "Verdicts on the workers' output.",
        [
            (
                "Verdicts",
                [
                    ts(
                        "Pass rate by worker type",
                        (pass_rate("worker_type"), "{{worker_type}}"),
                        unit="percentunit",
                        w=8,
                    ),
                    ts(
                        "Score p50 / p90 by worker type",
                        (quantile(0.5, SCORE, "worker_type"), "p50 {{worker_type}}"),
                        (quantile(0.9, SCORE, "worker_type"), "p90 {{worker_type}}"),
                        w=8,
                    ),
                    Panel("JetStream backlog", lag_panel("sidekick_evaluator").exprs, width=8),
                ],
            ),
            ("Model", llm_panels("evaluator")),
            ("Messaging", messaging_panels("evaluator")),
        ],
    )


def workers() -> dict[str, Any]:
    j = 'job="worker"'
    replicas = f"count by (worker_kind) ({q('sidekick_ready', j)})"
    from_workers = 'source="workers"'
    dead = f"sum by (reason) (increase({q(DEAD, from_workers)}[15m]))"
    cancels = total("sidekick_cancellations_total", "", 'service="workers"')
    return dashboard(
        "sidekick-workers",
        "Sidekick / Workers",
        "Every worker kind: backlog, replicas (KEDA), results, model and tool use.",
        [
            (
                "Scaling",
                [
                    lag_panel("sidekick_worker_.+", "JetStream backlog by worker kind"),
                    ts(
                        "Running pods by worker kind (KEDA scales each on its backlog)",
                        (replicas, "{{worker_kind}}"),
                    ),
                    ts("Dead letters (15 min) from workers", (dead, "{{reason}}")),
                    ts("Cancellations / s seen by workers", (cancels, "cancellations"), unit="ops"),
                ],
            ),
            ("Model", llm_panels("worker")),
            ("Messaging", messaging_panels("worker")),
        ],
    )


def nats() -> dict[str, Any]:
    def by_consumer(metric: str) -> str:
        return f"max by (consumer_name) ({metric}{{{WORK}}})"

    def by_stream(metric: str) -> str:
        return f"max by (stream_name) ({metric})"

    def by_server(metric: str) -> str:
        return f"sum by (server_id) ({metric})"

    stored = f"max by (stream_name) (max_over_time({DL_SEQ}[15m]) - min_over_time({DL_SEQ}[15m]))"
    c, s = "{{consumer_name}}", "{{stream_name}}"
    return dashboard(
        "sidekick-nats",
        "Sidekick / NATS JetStream",
        "The bus: consumer lag, streams and servers (prometheus-nats-exporter, -prefix=nats).",
        [
            (
                "Consumers",
                [
                    ts(
                        "Pending (not yet delivered)", (by_consumer("nats_consumer_num_pending"), c)
                    ),
                    ts(
                        "In flight (delivered, not acked)",
                        (by_consumer("nats_consumer_num_ack_pending"), c),
                    ),
                    ts("Redelivered", (by_consumer("nats_consumer_num_redelivered"), c)),
                    ts(
                        "Waiting pull requests (0: nobody is pulling)",
                        (by_consumer("nats_consumer_num_waiting"), c),
                    ),
                ],
            ),
            (
                "Streams",
                [
                    ts("Messages by stream", (by_stream("nats_stream_total_messages"), s), w=8),
                    ts(
                        "Bytes by stream",
                        (by_stream("nats_stream_total_bytes"), s),
                        unit="bytes",
                        w=8,
                    ),
                    ts("Dead letters stored (15 min)", (stored, s), w=8),
                ],
            ),
            (
                "Servers",
                [
                    ts(
                        "Client connections",
                        (by_server("nats_varz_connections"), "{{server_id}}"),
                        w=8,
                    ),
                    ts("Memory", (by_server("nats_varz_mem"), "{{server_id}}"), unit="bytes", w=8),
                    ts("CPU", (by_server("nats_varz_cpu"), "{{server_id}}"), unit="percent", w=8),
                ],
            ),
        ],
    )


DASHBOARDS = {
    "overview": overview,
    "gateway": gateway,
    "frontline": frontline,
    "orchestrator": orchestrator,
    "evaluator": evaluator,
    "workers": workers,
    "nats": nats,
}


def render() -> dict[str, str]:
    """File name -> JSON text, exactly as committed."""
    return {
        f"{name}.json": json.dumps(build(), indent=2, ensure_ascii=False) + "\n"
        for name, build in DASHBOARDS.items()
    }


def main(argv: list[str]) -> int:
    """Write the dashboards; with --check, only report the files that differ (exit 1)."""
    stale = []
    OUT.mkdir(exist_ok=True)
    for name, text in render().items():
        path = OUT / name
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        if "--check" in argv:
            stale.append(name)
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    if stale:
        print(f"out of date (run python {Path(__file__).name}): {', '.join(stale)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
