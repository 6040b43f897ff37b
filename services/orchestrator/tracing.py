"""Attempt spans. An attempt outlives any one handler (dispatch, result and verdict are three
messages, maybe on three replicas), so no process can hold its span open: the orchestrator
picks the span's id when it dispatches, publishes the worker's and evaluator's messages with
that span as their parent, and writes the span itself once the attempt's outcome is known."""

from __future__ import annotations

from opentelemetry import context as otel_context
from opentelemetry import trace

from services.orchestrator.state import LoopState
from services.runtime.base.metrics import ATTEMPTS, EVAL_SCORE, VERDICTS
from services.runtime.base.telemetry import preset_span_id, remote_parent

tracer = trace.get_tracer("sidekick.orchestrator")


class AttemptContext:
    """Make the attempt's span the parent of what is published inside the block."""

    def __init__(self, ctx: otel_context.Context | None) -> None:
        self.ctx = ctx
        self.token: object | None = None

    def __enter__(self) -> None:
        if self.ctx is not None:
            self.token = otel_context.attach(self.ctx)

    def __exit__(self, *exc: object) -> None:
        if self.token is not None:
            otel_context.detach(self.token)  # type: ignore[arg-type]


def in_attempt(state: LoopState, n: int) -> AttemptContext:
    attempt = next((a for a in state.attempts if a.n == n), None)
    if attempt is None or attempt.span_id is None or state.trace_id is None:
        return AttemptContext(None)
    return AttemptContext(remote_parent(state.trace_id, attempt.span_id))


def write_attempt_span(state: LoopState, n: int) -> None:
    """Write the span of attempt n, now that its outcome is known. Its id was chosen at
    dispatch, so the worker's and evaluator's spans are already its children."""
    attempt = next((a for a in state.attempts if a.n == n), None)
    if attempt is None or attempt.span_id is None or not state.trace_id or not state.span_id:
        return
    attrs: dict[str, str | int | bool] = {"sidekick.attempt": n}
    if state.decision:
        attrs["sidekick.worker_type"] = state.decision.worker_type
    if attempt.verdict is not None:
        attrs["sidekick.verdict.passed"] = attempt.verdict.passed
        attrs["sidekick.verdict.score"] = attempt.verdict.score
    if attempt.result is not None:
        attrs["sidekick.worker.success"] = attempt.result.success
    with preset_span_id(int(attempt.span_id, 16)):
        span = tracer.start_span(
            f"attempt {n}",
            context=remote_parent(state.trace_id, state.span_id),
            start_time=attempt.started_ns,
            attributes=attrs,
        )
    span.end()


def observe(state: LoopState) -> None:
    """An ended request's attempts and verdicts, as metrics."""
    ATTEMPTS.observe(len(state.attempts))
    for attempt in state.attempts:
        if attempt.verdict and attempt.result:
            kind = attempt.result.worker_type
            EVAL_SCORE.labels(kind).observe(attempt.verdict.score)
            VERDICTS.labels(kind, str(attempt.verdict.passed).lower()).inc()
