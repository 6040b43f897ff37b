"""The projection half of the attempt loop: what must be published now, and where the request's
record moves with it, derived from the loop's state alone. A handler that crashes after saving
state and before publishing republishes the same messages, with the same dedupe keys, when the
event is redelivered."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from contracts import (
    ClarificationRequested,
    EvaluationRequested,
    Question,
    RequestCancelled,
    RequestCompleted,
    RequestFailed,
    RequestState,
    Usage,
    Verdict,
    WorkerTask,
)
from services.orchestrator import authentic
from services.orchestrator.state import Attempt, LoopState
from services.runtime.approvals.questions import approval_question


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


def record_move(state: LoopState) -> tuple[RequestState, dict[str, Any]] | None:
    """Where the request's record moves, written with a loop state that goes on (an attempt
    dispatched, an evaluation asked for), and what it shows; None for one that ends or parks
    the request (its end is written with it) or is still deciding."""
    cur, decision = state.current, state.decision
    if cur is None or decision is None:
        return None
    if state.status == "working":
        return "working", {
            "worker_type": decision.worker_type,
            "attempt": cur.n,
            "detail": f"attempt {cur.n} with {decision.worker_type}",
            "clarification_questions": [],
            "approvals": state.approvals,
        }
    if state.status == "evaluating":
        return "evaluating", {
            "worker_type": decision.worker_type,
            "attempt": cur.n,
            "detail": f"judging attempt {cur.n}",
        }
    return None


def best(state: LoopState) -> Attempt | None:
    """The last attempt that produced output."""
    for attempt in reversed(state.attempts):
        if attempt.result and attempt.result.success:
            return attempt
    return None


def _last_verdict(state: LoopState) -> Verdict | None:
    for attempt in reversed(state.attempts):
        if attempt.verdict:
            return attempt.verdict
    return None


def next_messages(state: LoopState) -> list[Message]:
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
        source: Literal["evaluator", "planner"] = "planner"
        # Deterministic, so a redelivery republishes the same event.
        if state.waiting_tools:  # the client's own tools' calls: its results answer them
            event_id = f"{req.request_id}-tools-{state.tool_rounds + 1}"
        else:
            event_id = f"{req.request_id}-clarify-{state.rounds + 1}"
            if cur is not None and cur.verdict is not None:
                source = "evaluator"
        return [
            Finish(
                ClarificationRequested(
                    event_id=event_id,
                    request_id=req.request_id,
                    session_id=req.session_id,
                    questions=state.questions,
                    source=source,
                    attempt=cur.n if cur else None,
                    tool_calls=state.waiting_tools,
                )
            )
        ]
    if state.status == "awaiting_approval" and state.approval is not None:
        approval = state.approval
        asked = Question(id="approval", question=approval_question(approval))
        return [
            Finish(
                ClarificationRequested(
                    event_id=f"{req.request_id}-approve-{approval.approval_id}",
                    request_id=req.request_id,
                    session_id=req.session_id,
                    questions=[asked],
                    source="planner",
                    attempt=approval.attempt,
                    approval=approval,
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
            **_attempt(state, cur),
            parameters={p.name: p.value for p in decision.parameters},
            feedback=feedback,
            suggestions=suggestions,
            previous_output=previous_output,
            preferences=req.preferences,
            answers=state.answers,
            dispatch_token=authentic.token(state, "task", cur.n),
            approval_id=cur.approval_id,
            frontend_tools=req.frontend_tools,
            context=req.context,
            transcript=state.transcript,
            replay_of=req.replay.of if req.replay else None,
            model=replay_model(state, "worker"),
        )
        return [Dispatch(task)]
    if state.status == "evaluating":
        assert cur.result is not None
        judge = EvaluationRequested(
            **_attempt(state, cur),
            output=cur.result.output,
            sources=cur.result.sources,
            dispatch_token=authentic.token(state, "evaluate", cur.n),
            model=replay_model(state, "evaluator"),
        )
        return [Evaluate(judge)]
    return []


def replay_model(state: LoopState, role: str) -> str | None:
    """The model a replay asked for `role` (None: the role's own)."""
    replay = state.request.replay
    return replay.models.get(role) if replay is not None else None


def _attempt(state: LoopState, cur: Attempt) -> dict[str, Any]:
    """What the worker's task and the evaluator's request both say about attempt `cur`: whose
    request, what was asked and decided, and the conversation and answers behind it."""
    req, decision = state.request, state.decision
    assert decision is not None
    return {
        "request_id": req.request_id,
        "session_id": req.session_id,
        "attempt": cur.n,
        "worker_type": decision.worker_type,
        "message": req.message,
        "task_description": decision.task_description,
        "success_criteria": decision.success_criteria,
        "history": req.history,
        "clarifications": state.clarifications,
    }


def _final(state: LoopState) -> RequestCompleted:
    req = state.request
    chosen = best(state)
    assert chosen is not None and chosen.result is not None
    verdict = _last_verdict(state)
    output = chosen.result.output
    status: Literal["completed", "partial"] = "completed"
    if state.status == "partial":
        status = "partial"
        output = output + "\n\n" + (state.budget_note or partial_note(state, verdict, chosen))
    return RequestCompleted(
        request_id=req.request_id,
        session_id=req.session_id,
        status=status,
        output=output,
        route="orchestrated",
        worker_type=chosen.result.worker_type,
        attempts=len(state.attempts),
        score=verdict.score if verdict else None,
        feedback=verdict.feedback if verdict else None,
        sources=chosen.result.sources,
        usage=shown_usage(state),
        usage_estimated=shown_usage(state).counted_calls > 0,
        trace_id=state.trace_id,
    )


def shown_usage(state: LoopState) -> Usage:
    """The request's usage as its end shows it: the frontline's routing call and the
    orchestrated steps (the day counts each part once, where it was spent)."""
    return state.request.usage + state.usage


def partial_note(state: LoopState, verdict: Verdict | None, best: Attempt) -> str:
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
