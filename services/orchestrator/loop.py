"""The attempt loop as plain logic: no broker, no I/O, testable on its own.

`apply(state, event)` folds one incoming event into the request's state. It is idempotent: a
duplicate or stale event leaves the state unchanged. `next_messages(state)` derives what must
be published from the state alone, so a handler that crashes after saving state and before
publishing republishes the same messages (with the same dedupe keys) on redelivery.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from contracts import (
    EvaluationRequested,
    Model,
    OrchestratorDecision,
    RequestCompleted,
    RequestFailed,
    RequestRouted,
    Usage,
    Verdict,
    VerdictIssued,
    WorkerResult,
    WorkerTask,
)

Status = Literal["deciding", "working", "evaluating", "completed", "partial", "failed"]
TERMINAL: frozenset[str] = frozenset({"completed", "partial", "failed"})


class Attempt(Model):
    n: int = Field(ge=1, description="Attempt number.")
    result: WorkerResult | None = Field(default=None, description="The worker's result.")
    verdict: Verdict | None = Field(default=None, description="The evaluator's verdict.")
    verdict_error: str | None = Field(default=None, description="Why no verdict could be had.")


class RequestState(Model):
    """Everything the loop knows about one request; lives in the `requests` bucket."""

    request: RequestRouted = Field(description="The routed request.")
    max_attempts: int = Field(ge=1, description="Attempt budget.")
    status: Status = Field(default="deciding", description="Where the loop is.")
    decision: OrchestratorDecision | None = Field(default=None, description="The decision.")
    attempts: list[Attempt] = Field(default_factory=list, description="Attempts so far.")
    failure: RequestFailed | None = Field(default=None, description="Set when it failed.")
    usage: Usage = Field(default_factory=Usage, description="Model usage so far.")

    @property
    def current(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None


@dataclass(frozen=True)
class Dispatch:
    task: WorkerTask


@dataclass(frozen=True)
class Evaluate:
    request: EvaluationRequested


@dataclass(frozen=True)
class Finish:
    event: RequestCompleted | RequestFailed


Message = Dispatch | Evaluate | Finish


def start(request: RequestRouted, max_attempts: int) -> RequestState:
    return RequestState(request=request, max_attempts=max_attempts)


def decided(
    state: RequestState, decision: OrchestratorDecision, usage: Usage, known_workers: set[str]
) -> RequestState:
    if state.status != "deciding":
        return state
    req = state.request
    if req.success_criteria:  # the user's criteria win
        decision = decision.model_copy(update={"success_criteria": req.success_criteria})
    usage = state.usage + usage
    if decision.worker_type == "NONE":
        why = decision.task_description or "The request cannot be handled."
        return _fail(state, "refused", f"Sidekick will not do this: {why}", decision, usage)
    if decision.worker_type not in known_workers:
        msg = (
            f"The orchestrator chose the {decision.worker_type} worker, which is not available "
            f"here (available: {', '.join(sorted(known_workers))})."
        )
        return _fail(state, "unknown_worker", msg, decision, usage)
    return state.model_copy(
        update={
            "decision": decision,
            "status": "working",
            "attempts": [Attempt(n=1)],
            "usage": usage,
        }
    )


def failed(state: RequestState, code: str, error: str) -> RequestState:
    if state.status in TERMINAL:
        return state
    return _fail(state, code, error, state.decision, state.usage)


def _fail(
    state: RequestState,
    code: str,
    error: str,
    decision: OrchestratorDecision | None,
    usage: Usage,
) -> RequestState:
    req = state.request
    failure = RequestFailed(
        request_id=req.request_id,
        session_id=req.session_id,
        code=code,
        error=error,
    )
    return state.model_copy(
        update={"status": "failed", "failure": failure, "decision": decision, "usage": usage}
    )


def on_result(state: RequestState, result: WorkerResult) -> RequestState:
    cur = state.current
    if state.status != "working" or cur is None or cur.n != result.attempt or cur.result:
        return state  # stale or duplicate
    attempts = [*state.attempts[:-1], cur.model_copy(update={"result": result})]
    state = state.model_copy(update={"attempts": attempts, "usage": state.usage + result.usage})
    if not result.success:
        if result.retryable and cur.n < state.max_attempts:
            return _next_attempt(state)
        if _best(state) is not None:
            return _finish_partial(state)
        return _fail(
            state,
            "worker_failed",
            f"The {result.worker_type} worker could not do this: {result.error}",
            state.decision,
            state.usage,
        )
    if not state.request.use_evaluator:
        return state.model_copy(update={"status": "completed"})
    return state.model_copy(update={"status": "evaluating"})


def on_verdict(state: RequestState, event: VerdictIssued) -> RequestState:
    cur = state.current
    if state.status != "evaluating" or cur is None or cur.n != event.attempt or cur.verdict:
        return state
    if event.error:
        attempts = [*state.attempts[:-1], cur.model_copy(update={"verdict_error": event.error})]
        return state.model_copy(update={"attempts": attempts, "status": "partial"})
    attempts = [*state.attempts[:-1], cur.model_copy(update={"verdict": event.verdict})]
    state = state.model_copy(update={"attempts": attempts, "usage": state.usage + event.usage})
    assert event.verdict is not None
    if event.verdict.passed:
        return state.model_copy(update={"status": "completed"})
    if cur.n < state.max_attempts:
        return _next_attempt(state)
    return _finish_partial(state)


def _next_attempt(state: RequestState) -> RequestState:
    n = len(state.attempts) + 1
    return state.model_copy(
        update={"attempts": [*state.attempts, Attempt(n=n)], "status": "working"}
    )


def _finish_partial(state: RequestState) -> RequestState:
    return state.model_copy(update={"status": "partial"})


def _best(state: RequestState) -> Attempt | None:
    """The last attempt that produced output."""
    for attempt in reversed(state.attempts):
        if attempt.result and attempt.result.success:
            return attempt
    return None


def _last_verdict(state: RequestState) -> Verdict | None:
    for attempt in reversed(state.attempts):
        if attempt.verdict:
            return attempt.verdict
    return None


def next_messages(state: RequestState) -> list[Message]:
    """What the state says must be published now (idempotent by dedupe keys)."""
    req = state.request
    if state.status == "failed":
        assert state.failure is not None
        return [Finish(state.failure)]
    if state.status in ("completed", "partial"):
        return [Finish(_final(state))]
    cur = state.current
    if cur is None or state.decision is None:
        return []
    decision = state.decision
    if state.status == "working":
        prev = state.attempts[-2] if len(state.attempts) > 1 else None
        feedback, suggestions, previous_output = None, [], None
        if prev is not None:
            previous_output = prev.result.output if prev.result else None
            if prev.verdict is not None:
                feedback, suggestions = prev.verdict.feedback, list(prev.verdict.suggestions)
            elif prev.result and prev.result.error:
                feedback = f"The previous attempt failed: {prev.result.error}"
        task = WorkerTask(
            request_id=req.request_id,
            session_id=req.session_id,
            attempt=cur.n,
            worker_type=decision.worker_type,
            message=req.message,
            task_description=decision.task_description,
            parameters={p.name: p.value for p in decision.parameters},
            success_criteria=decision.success_criteria,
            feedback=feedback,
            suggestions=suggestions,
            previous_output=previous_output,
            history=req.history,
        )
        return [Dispatch(task)]
    if state.status == "evaluating":
        assert cur.result is not None
        return [
            Evaluate(
                EvaluationRequested(
                    request_id=req.request_id,
                    session_id=req.session_id,
                    attempt=cur.n,
                    worker_type=decision.worker_type,
                    message=req.message,
                    task_description=decision.task_description,
                    success_criteria=decision.success_criteria,
                    output=cur.result.output,
                    sources=cur.result.sources,
                    history=req.history,
                )
            )
        ]
    return []


def _final(state: RequestState) -> RequestCompleted:
    req = state.request
    best = _best(state)
    assert best is not None and best.result is not None
    verdict = _last_verdict(state)
    output = best.result.output
    status: Literal["completed", "partial"] = "completed"
    if state.status == "partial":
        status = "partial"
        output = output + "\n\n" + partial_note(state, verdict, best)
    return RequestCompleted(
        request_id=req.request_id,
        session_id=req.session_id,
        status=status,
        output=output,
        route="orchestrated",
        worker_type=best.result.worker_type,
        attempts=len(state.attempts),
        score=verdict.score if verdict else None,
        feedback=verdict.feedback if verdict else None,
        sources=best.result.sources,
        usage=state.usage,
    )


def partial_note(state: RequestState, verdict: Verdict | None, best: Attempt) -> str:
    if best.verdict_error:
        return f"Note: this answer could not be checked by the evaluator ({best.verdict_error})."
    n = len(state.attempts)
    plural = "attempt" if n == 1 else "attempts"
    if verdict is None:
        return f"Note: this is the best answer after {n} {plural}; it was not fully checked."
    return (
        f"Note: after {n} {plural} this answer still does not fully meet the success criteria. "
        f"The evaluator's last feedback: {verdict.feedback}"
    )
