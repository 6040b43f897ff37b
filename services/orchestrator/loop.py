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
    ClarificationAnswered,
    ClarificationRequested,
    EvaluationRequested,
    Model,
    OrchestratorDecision,
    Question,
    RequestCancelled,
    RequestCompleted,
    RequestFailed,
    RequestRouted,
    Usage,
    Verdict,
    VerdictIssued,
    WorkerResult,
    WorkerTask,
)

Status = Literal[
    "deciding",
    "working",
    "evaluating",
    "awaiting_clarification",
    "completed",
    "partial",
    "failed",
    "cancelled",
]
TERMINAL: frozenset[str] = frozenset({"completed", "partial", "failed", "cancelled"})
MAX_CLARIFICATION_ROUNDS = 2
# Kinds whose success is a side effect in the world (a sent email): judging it afterwards could
# only lead to a second send, so a successful result ends the request.
SIDE_EFFECT_WORKERS = frozenset({"EMAIL"})


class Attempt(Model):
    n: int = Field(ge=1, description="Attempt number.")
    result: WorkerResult | None = Field(default=None, description="The worker's result.")
    verdict: Verdict | None = Field(default=None, description="The evaluator's verdict.")
    verdict_error: str | None = Field(default=None, description="Why no verdict could be had.")
    span_id: str | None = Field(default=None, description="Trace span id of the attempt (hex).")
    started_ns: int | None = Field(default=None, description="When it was dispatched (ns).")


class RequestState(Model):
    """Everything the loop knows about one request; lives in the `requests` bucket."""

    request: RequestRouted = Field(description="The routed request.")
    max_attempts: int = Field(ge=1, description="Attempt budget.")
    status: Status = Field(default="deciding", description="Where the loop is.")
    decision: OrchestratorDecision | None = Field(default=None, description="The decision.")
    attempts: list[Attempt] = Field(default_factory=list, description="Attempts so far.")
    failure: RequestFailed | None = Field(default=None, description="Set when it failed.")
    usage: Usage = Field(default_factory=Usage, description="Model usage so far.")
    questions: list[Question] = Field(default_factory=list, description="Open questions.")
    clarifications: list[str] = Field(
        default_factory=list, description="Answered questions ('Q: ... A: ...')."
    )
    rounds: int = Field(default=0, ge=0, description="Clarification rounds so far.")
    cancel_reason: str | None = Field(default=None, description="Why it was cancelled.")
    trace_id: str | None = Field(default=None, description="Trace id of the request (hex).")
    span_id: str | None = Field(default=None, description="Span the attempts hang under (hex).")

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
    event: RequestCompleted | RequestFailed | RequestCancelled | ClarificationRequested


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
    if result.clarification_questions and state.rounds < MAX_CLARIFICATION_ROUNDS:
        return _park(state, result.clarification_questions)
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
    if not state.request.use_evaluator or result.worker_type in SIDE_EFFECT_WORKERS:
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
    v = event.verdict
    if v.user_input_needed and not v.passed and state.rounds < MAX_CLARIFICATION_ROUNDS:
        return _park(state, v.questions or [v.feedback])
    if event.verdict.passed:
        return state.model_copy(update={"status": "completed"})
    if cur.n < state.max_attempts:
        return _next_attempt(state)
    return _finish_partial(state)


def _park(state: RequestState, questions: list[str]) -> RequestState:
    qs = [Question(id=f"q{i + 1}", question=q) for i, q in enumerate(questions) if q.strip()]
    if not qs:
        qs = [Question(id="q1", question="Could you tell me more about what you need?")]
    return state.model_copy(update={"status": "awaiting_clarification", "questions": qs})


def answered(state: RequestState, event: ClarificationAnswered) -> RequestState:
    """Resume a parked request with the user's answers (a clarification does not use up an
    attempt). Answers to a request that is not parked are ignored."""
    if state.status != "awaiting_clarification":
        return state
    pairs = []
    for q in state.questions:
        answer = event.answers.get(q.id)
        if answer:
            pairs.append(f"Q: {q.question} A: {answer}")
    if event.message.strip():
        asked = " / ".join(q.question for q in state.questions)
        pairs.append(f"Q: {asked} A: {event.message.strip()}")
    if event.additional_context:
        pairs.append(f"Additional context from the user: {event.additional_context}")
    state = state.model_copy(
        update={
            "clarifications": [*state.clarifications, *pairs],
            "questions": [],
            "rounds": state.rounds + 1,
            "max_attempts": state.max_attempts + 1,
        }
    )
    return _next_attempt(state)


def cancelled(state: RequestState, reason: str) -> RequestState:
    if state.status in TERMINAL:
        return state
    return state.model_copy(update={"status": "cancelled", "cancel_reason": reason})


def attempt_started(state: RequestState, n: int, span_id: str, started_ns: int) -> RequestState:
    """Remember the trace span of attempt n the first time it is dispatched."""
    cur = state.current
    if cur is None or cur.n != n or cur.span_id is not None:
        return state
    attempts = [
        *state.attempts[:-1],
        cur.model_copy(update={"span_id": span_id, "started_ns": started_ns}),
    ]
    return state.model_copy(update={"attempts": attempts})


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
        return [Finish(state.failure.model_copy(update={"trace_id": state.trace_id}))]
    if state.status == "cancelled":
        return [
            Finish(
                RequestCancelled(
                    request_id=req.request_id,
                    session_id=req.session_id,
                    reason=state.cancel_reason or "cancelled",
                    trace_id=state.trace_id,
                )
            )
        ]
    if state.status == "awaiting_clarification":
        cur = state.current
        source: Literal["evaluator", "planner"] = (
            "evaluator" if cur is not None and cur.verdict is not None else "planner"
        )
        return [
            Finish(
                ClarificationRequested(
                    # Deterministic, so a redelivery republishes the same event.
                    event_id=f"{req.request_id}-clarify-{state.rounds + 1}",
                    request_id=req.request_id,
                    session_id=req.session_id,
                    questions=state.questions,
                    source=source,
                    attempt=cur.n if cur else None,
                )
            )
        ]
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
            clarifications=state.clarifications,
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
                    clarifications=state.clarifications,
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
        trace_id=state.trace_id,
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
