"""The domain's Prometheus metrics. One registry per process; `/metrics` serves it.
`counter`, `histogram` and `gauge` make a metric in it (the services' others too)."""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)


def counter(name: str, doc: str, labels: Sequence[str] = ()) -> Counter:
    return Counter(name, doc, labels, registry=REGISTRY)


def histogram(name: str, doc: str, labels: Sequence[str], *, buckets: Sequence[float]) -> Histogram:
    return Histogram(name, doc, labels, registry=REGISTRY, buckets=buckets)


def gauge(name: str, doc: str, labels: Sequence[str] = ()) -> Gauge:
    return Gauge(name, doc, labels, registry=REGISTRY)


LLM_LATENCY = histogram(
    "sidekick_llm_request_duration_seconds",
    "Latency of model calls.",
    ["role", "model", "outcome"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120),
)
LLM_TOKENS = counter(
    "sidekick_llm_tokens_total", "Tokens used by model calls.", ["role", "model", "direction"]
)
LLM_ERRORS = counter(
    "sidekick_llm_errors_total",
    "Model calls that failed after retries, by error type.",
    ["role", "model", "error"],
)
REQUESTS = counter(
    "sidekick_requests_total",
    "Requests that reached a terminal state, by outcome and route.",
    ["outcome", "route"],
)
REQUEST_DURATION = histogram(
    "sidekick_request_duration_seconds",
    "Seconds from the gateway accepting a request to its terminal state, by outcome and route.",
    ["outcome", "route"],
    buckets=(0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600),
)
ATTEMPTS = histogram(
    "sidekick_request_attempts",
    "Attempts per orchestrated request.",
    (),
    buckets=(1, 2, 3, 4, 5, 10),
)
EVAL_SCORE = histogram(
    "sidekick_evaluator_score",
    "Evaluator scores by worker type.",
    ["worker_type"],
    buckets=(10, 20, 30, 40, 50, 60, 70, 80, 90, 100),
)
VERDICTS = counter(
    "sidekick_evaluator_verdicts_total",
    "Verdicts by worker type and result.",
    ["worker_type", "passed"],
)
DEAD_LETTERS = counter(
    "sidekick_dead_letters_total", "Messages moved to the dead-letter stream.", ["source", "reason"]
)
BUS_HANDLED = counter(
    "sidekick_bus_messages_total",
    "Messages of a durable consumer handled, by consumer and result (acked, retried, "
    "rejected as poison, dead_lettered after the last delivery).",
    ["consumer", "result"],
)
BUS_SECONDS = histogram(
    "sidekick_bus_handler_duration_seconds",
    "Seconds a durable consumer's handler took per message.",
    ["consumer"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
BUS_IN_PROGRESS = gauge(
    "sidekick_bus_messages_in_progress",
    "Messages of a durable consumer being handled now.",
    ["consumer"],
)
READY = gauge(
    "sidekick_ready",
    "1 while this process has started and is connected to NATS (its own /readyz), else 0.",
)
WS_CONNECTIONS = gauge("sidekick_gateway_websocket_connections", "Open WebSocket connections.")
GATEWAY_EVENTS = counter(
    "sidekick_gateway_events_total",
    "Client-bound events (stream chunks, progress, outcomes) the gateway heard, by kind.",
    ["kind"],
)
GATEWAY_FRAMES_REJECTED = counter(
    "sidekick_gateway_frames_rejected_total", "Client frames rejected, by reason.", ["reason"]
)
CACHE_LOOKUPS = counter(
    "sidekick_cache_lookups_total",
    "Semantic cache lookups by result (hit, miss, skipped, error).",
    ["result"],
)
SPEND_TOKENS = counter(
    "sidekick_spend_tokens_total",
    "Model tokens of ended requests, by principal (hashed), model and direction.",
    ["principal", "model", "direction"],
)
SPEND_USD = counter(
    "sidekick_spend_usd_total",
    "Money of ended requests by the price table, by principal (hashed) and model.",
    ["principal", "model"],
)
CLARIFICATIONS = counter(
    "sidekick_clarifications_total", "Requests parked to ask the user, by who asked.", ["source"]
)
CANCELLATIONS = counter(
    "sidekick_cancellations_total", "Cancellations seen, by the hop that stopped work.", ["service"]
)
