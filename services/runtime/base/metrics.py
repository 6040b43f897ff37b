"""The domain's Prometheus metrics. One registry per process; `/metrics` serves it."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)

LLM_LATENCY = Histogram(
    "sidekick_llm_request_duration_seconds",
    "Latency of model calls.",
    ["role", "model", "outcome"],
    registry=REGISTRY,
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120),
)
LLM_TOKENS = Counter(
    "sidekick_llm_tokens_total",
    "Tokens used by model calls.",
    ["role", "model", "direction"],
    registry=REGISTRY,
)
LLM_ERRORS = Counter(
    "sidekick_llm_errors_total",
    "Model calls that failed after retries, by error type.",
    ["role", "model", "error"],
    registry=REGISTRY,
)
REQUESTS = Counter(
    "sidekick_requests_total",
    "Requests that reached a terminal state, by outcome and route.",
    ["outcome", "route"],
    registry=REGISTRY,
)
REQUEST_DURATION = Histogram(
    "sidekick_request_duration_seconds",
    "Seconds from the gateway accepting a request to its terminal state, by outcome and route.",
    ["outcome", "route"],
    registry=REGISTRY,
    buckets=(0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600),
)
ATTEMPTS = Histogram(
    "sidekick_request_attempts",
    "Attempts per orchestrated request.",
    registry=REGISTRY,
    buckets=(1, 2, 3, 4, 5, 10),
)
EVAL_SCORE = Histogram(
    "sidekick_evaluator_score",
    "Evaluator scores by worker type.",
    ["worker_type"],
    registry=REGISTRY,
    buckets=(10, 20, 30, 40, 50, 60, 70, 80, 90, 100),
)
VERDICTS = Counter(
    "sidekick_evaluator_verdicts_total",
    "Verdicts by worker type and result.",
    ["worker_type", "passed"],
    registry=REGISTRY,
)
DEAD_LETTERS = Counter(
    "sidekick_dead_letters_total",
    "Messages moved to the dead-letter stream.",
    ["source", "reason"],
    registry=REGISTRY,
)
BUS_HANDLED = Counter(
    "sidekick_bus_messages_total",
    "Messages of a durable consumer handled, by consumer and result (acked, retried, "
    "rejected as poison, dead_lettered after the last delivery).",
    ["consumer", "result"],
    registry=REGISTRY,
)
BUS_SECONDS = Histogram(
    "sidekick_bus_handler_duration_seconds",
    "Seconds a durable consumer's handler took per message.",
    ["consumer"],
    registry=REGISTRY,
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
BUS_IN_PROGRESS = Gauge(
    "sidekick_bus_messages_in_progress",
    "Messages of a durable consumer being handled now.",
    ["consumer"],
    registry=REGISTRY,
)
READY = Gauge(
    "sidekick_ready",
    "1 while this process has started and is connected to NATS (its own /readyz), else 0.",
    registry=REGISTRY,
)
WS_CONNECTIONS = Gauge(
    "sidekick_gateway_websocket_connections",
    "Open WebSocket connections.",
    registry=REGISTRY,
)
GATEWAY_EVENTS = Counter(
    "sidekick_gateway_events_total",
    "Client-bound events (stream chunks, progress, outcomes) the gateway heard, by kind.",
    ["kind"],
    registry=REGISTRY,
)
GATEWAY_FRAMES_REJECTED = Counter(
    "sidekick_gateway_frames_rejected_total",
    "Client frames rejected, by reason.",
    ["reason"],
    registry=REGISTRY,
)
CACHE_LOOKUPS = Counter(
    "sidekick_cache_lookups_total",
    "Semantic cache lookups by result (hit, miss, skipped, error).",
    ["result"],
    registry=REGISTRY,
)
SPEND_TOKENS = Counter(
    "sidekick_spend_tokens_total",
    "Model tokens of ended requests, by principal (hashed), model and direction.",
    ["principal", "model", "direction"],
    registry=REGISTRY,
)
SPEND_USD = Counter(
    "sidekick_spend_usd_total",
    "Money of ended requests by the price table, by principal (hashed) and model.",
    ["principal", "model"],
    registry=REGISTRY,
)
CLARIFICATIONS = Counter(
    "sidekick_clarifications_total",
    "Requests parked to ask the user, by who asked.",
    ["source"],
    registry=REGISTRY,
)
CANCELLATIONS = Counter(
    "sidekick_cancellations_total",
    "Cancellations seen, by the hop that stopped work.",
    ["service"],
    registry=REGISTRY,
)
