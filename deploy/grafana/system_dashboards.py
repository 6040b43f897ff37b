"""The dashboards of the system as a whole: the overview (requests, outcomes, the attempt
loop, models, health) and the NATS JetStream bus under it."""

from __future__ import annotations

from typing import Any

from metric_names import ATTEMPTS, CANCELS, DEAD, DL_SEQ, FAILED, REQ, REQ_TIME, SCORE, WORK
from panels import dashboard, pass_rate, q, quantile, quote, rate_by, stat, total, ts
from shared_panels import lag_panel, llm_panels, pass_rate_panel


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
                    rate_by("Requests / s by outcome", REQ, "outcome", unit="reqps", w=8),
                    rate_by("Requests / s by route", REQ, "route", unit="reqps", w=8),
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
                    pass_rate_panel("Evaluator pass rate by worker type"),
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
                        (total(CANCELS), "cancellations"),
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
