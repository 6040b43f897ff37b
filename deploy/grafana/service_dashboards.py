"""One dashboard per service, as a table (SERVICE_DASHBOARDS): its own panels (a function
each, below) in a section of their own, then its model use and its bus (shared_panels.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from metric_names import ATTEMPTS, DEAD, REQ, SCORE
from panels import Panel, dashboard, q, quantile, rate_by, ts
from shared_panels import cancels_panel, lag_panel, llm_panels, messaging_panels, pass_rate_panel


def clients() -> list[Panel]:
    sockets = f"sum by (pod) ({q('sidekick_gateway_websocket_connections')})"
    return [
        ts("Open WebSockets by pod", (sockets, "{{pod}}")),
        rate_by(
            "Rejected client frames / s by reason",
            "sidekick_gateway_frames_rejected_total",
            "reason",
        ),
        rate_by(
            "Client-bound events heard / s by kind",
            "sidekick_gateway_events_total",
            "kind",
            'job="gateway"',
        ),
    ]


def answers() -> list[Panel]:
    return [
        rate_by("Direct answers / s by outcome", REQ, "outcome", 'route="direct"', unit="reqps"),
        cancels_panel("Cancellations / s seen by frontline", "frontline"),
        lag_panel("sidekick_frontline"),
    ]


def attempt_loop() -> list[Panel]:
    attempts = f"sum by (le) (increase({q(ATTEMPTS + '_bucket')}[1h]))"
    return [
        rate_by(
            "Orchestrated requests / s by outcome",
            REQ,
            "outcome",
            'route="orchestrated"',
            unit="reqps",
            w=8,
        ),
        ts("Requests in the last hour with at most N attempts", (attempts, "≤ {{le}}"), w=8),
        rate_by(
            "Verdicts / s",
            "sidekick_evaluator_verdicts_total",
            "worker_type, passed",
            legend="{{worker_type}} passed={{passed}}",
            w=8,
        ),
        rate_by("Clarifications / s by source", "sidekick_clarifications_total", "source", w=8),
        rate_by(
            "Semantic cache lookups / s by result", "sidekick_cache_lookups_total", "result", w=8
        ),
        cancels_panel("Cancellations / s seen by the orchestrator", "orchestrator", w=8),
        rate_by("Spend: USD / s by model (price table)", "sidekick_spend_usd_total", "model", w=8),
        rate_by(
            "Spend: tokens / s by principal (hashed) and direction",
            "sidekick_spend_tokens_total",
            "principal, direction",
            w=8,
        ),
        lag_panel("sidekick_orchestrator_.+"),
    ]


def verdicts() -> list[Panel]:
    return [
        pass_rate_panel("Pass rate by worker type"),
        ts(
            "Score p50 / p90 by worker type",
            (quantile(0.5, SCORE, "worker_type"), "p50 {{worker_type}}"),
            (quantile(0.9, SCORE, "worker_type"), "p90 {{worker_type}}"),
            w=8,
        ),
        Panel("JetStream backlog", lag_panel("sidekick_evaluator").exprs, width=8),
    ]


def scaling() -> list[Panel]:
    j = 'job="worker"'
    replicas = f"count by (worker_kind) ({q('sidekick_ready', j)})"
    from_workers = 'source="workers"'
    dead = f"sum by (reason) (increase({q(DEAD, from_workers)}[15m]))"
    return [
        lag_panel("sidekick_worker_.+", "JetStream backlog by worker kind"),
        ts(
            "Running pods by worker kind (KEDA scales each on its backlog)",
            (replicas, "{{worker_kind}}"),
        ),
        ts("Dead letters (15 min) from workers", (dead, "{{reason}}")),
        cancels_panel("Cancellations / s seen by workers", "workers", "cancellations"),
    ]


@dataclass(frozen=True)
class ServiceDashboard:
    """A service's dashboard: its own section, then its `role`'s model use (when it calls a
    model) and its bus as `job` (the PodMonitor's name for it; the service's by default)."""

    name: str
    description: str
    section: str
    panels: Callable[[], list[Panel]]
    role: str | None = None
    job: str = ""

    def build(self) -> dict[str, Any]:
        model = [("Model", llm_panels(self.role))] if self.role else []
        return dashboard(
            f"sidekick-{self.name}",
            f"Sidekick / {self.name.capitalize()}",
            self.description,
            [
                (self.section, self.panels()),
                *model,
                ("Messaging", messaging_panels(self.job or self.name)),
            ],
        )


SERVICE_DASHBOARDS = [
    ServiceDashboard("gateway", "The WebSocket and HTTP entry point.", "Clients", clients),
    ServiceDashboard(
        "frontline",
        "Direct answers and routing to the orchestrator.",
        "Answers",
        answers,
        role="frontline",
    ),
    ServiceDashboard(
        "orchestrator",
        "Decisions and the attempt loop.",
        "Attempt loop",
        attempt_loop,
        role="orchestrator",
    ),
    ServiceDashboard(
        "evaluator", "Verdicts on the workers' output.", "Verdicts", verdicts, role="evaluator"
    ),
    ServiceDashboard(
        "workers",
        "Every worker kind: backlog, replicas (KEDA), results, model and tool use.",
        "Scaling",
        scaling,
        role="worker",
        job="worker",
    ),
]
