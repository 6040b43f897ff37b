"""What several of Sidekick's dashboards show alike: a role's model use, a service's bus (its
durable consumers and readiness), a consumer backlog, the cancellations a service saw, and the
evaluator's pass rate."""

from __future__ import annotations

from metric_names import CANCELS, LLM_TIME, WORK
from panels import Panel, pass_rate, q, quantile, rate_by, total, ts


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
        rate_by(
            "Tokens / s by model",
            "sidekick_llm_tokens_total",
            "model, direction",
            *m,
            unit="short",
            w=8,
        ),
        rate_by(
            "Model errors / s (after retries)",
            "sidekick_llm_errors_total",
            f"{by}, error",
            *m,
            legend=f"{legend} {{{{error}}}}",
            unit="reqps",
            w=8,
        ),
    ]


def messaging_panels(job: str) -> list[Panel]:
    """The bus as one service sees it: its durable consumers' messages and handlers, and
    readiness (services/runtime/bus/core.py)."""
    j = f'job="{job}"'
    return [
        rate_by(
            "Messages handled / s by consumer and result",
            "sidekick_bus_messages_total",
            "consumer, result",
            j,
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


def cancels_panel(title: str, service: str, legend: str = "cancels", w: int = 12) -> Panel:
    """Cancellations / s one service saw."""
    return ts(title, (total(CANCELS, "", f'service="{service}"'), legend), unit="ops", w=w)


def pass_rate_panel(title: str) -> Panel:
    """The evaluator's pass rate, one series per worker type."""
    return ts(title, (pass_rate("worker_type"), "{{worker_type}}"), unit="percentunit", w=8)
