"""The attempt loop as plain logic: no broker, no I/O, testable on its own.

`apply(state, event)` folds one incoming event into the loop's state (one function per kind of
event below). It is idempotent: a duplicate or stale event leaves the state unchanged. What
must be published is derived from the state alone (`projection.next_messages`), so a handler
that crashes after saving state and before publishing republishes the same messages (with the
same dedupe keys) on redelivery.
"""

from __future__ import annotations

from contracts import (
    TERMINAL_STATES,
    ClarificationAnswered,
    OrchestratorDecision,
    Question,
    RequestFailed,
    RequestRouted,
    Usage,
    VerdictIssued,
    WorkerResult,
    utcnow,
)
from contracts.approvals import Approval, ApprovalAsk
from services.orchestrator import frontend
from services.orchestrator.projection import (
    Dispatch,
    Evaluate,
    Finish,
    Message,
    best,
    next_messages,
    partial_note,
)
from services.orchestrator.state import (
    MAX_CLARIFICATION_ROUNDS,
    SIDE_EFFECT_WORKERS,
    Attempt,
    LoopState,
    Status,
)
from services.runtime.approvals import asking
from services.runtime.requests.replays import replay_refusal

__all__ = [
    "Attempt",
    "Dispatch",
    "Evaluate",
    "Finish",
    "LoopState",
    "Message",
    "Status",
    "next_messages",
    "partial_note",
]


def start(request: RequestRouted, max_attempts: int) -> LoopState:
    # The session the request came with is no part of the loop (kept apart: store.py).
    if request.session is not None:
        request = request.model_copy(update={"session": None})
    return LoopState(request=request, max_attempts=max_attempts)


PLANNED_CRITERIA = (
    "A complete, well-organised answer to the request that covers everything it asks for, "
    "grounded in the cited sources, with any details the user gave respected."
)


def planned_decision(request: RequestRouted) -> OrchestratorDecision:
    """A workflow's decision, without a model call: research the request as the user wrote it
    (the research planner asks the user first when it must)."""
    return OrchestratorDecision(
        worker_type="RESEARCH",
        task_description=request.message,
        parameters=[],
        success_criteria=request.success_criteria or PLANNED_CRITERIA,
    )


def decided(
    state: LoopState, decision: OrchestratorDecision, usage: Usage, known_workers: set[str]
) -> LoopState:
    if state.status != "deciding":
        return state
    req = state.request
    if req.success_criteria:  # the user's criteria win
        decision = decision.model_copy(update={"success_criteria": req.success_criteria})
    spent, usage = usage, state.usage + usage
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
            "decided_at": utcnow(),
            "decision_usage": spent,
        }
    )


def replayed(
    state: LoopState, original: LoopState | None, from_step: str, known_workers: set[str]
) -> LoopState:
    """A replay's first state: the original's decision, and its attempts before the step the
    replay starts at, taken as recorded (`recorded_from`); the live part starts with the next
    attempt (`attempt:N`) or with attempt N's evaluation (`evaluation:N`). A replay from the
    decision stays deciding: it is decided live, as any request. A step the original never
    reached fails the replay, saying so."""
    what, _, number = from_step.partition(":")
    if state.status != "deciding" or what == "decision":
        return state
    n = int(number)
    why = replay_refusal(original, what, n)
    if why is not None:
        return _fail(state, "refused", why, None, state.usage)
    assert original is not None and original.decision is not None
    if original.decision.worker_type not in known_workers:
        kind = original.decision.worker_type
        return _fail(
            state, "unknown_worker", f"The {kind} worker is not available here.", None, state.usage
        )
    of = original.request.request_id
    kept = [
        a.model_copy(update={"recorded_from": of, "span_id": None})
        for a in original.attempts[: n - 1]
    ]
    update: dict[str, object] = {
        "decision": original.decision,
        "decided_at": utcnow(),
        "decision_usage": Usage(),
        "max_attempts": max(state.max_attempts, n),
        "clarifications": original.clarifications,
        "answers": original.answers,
    }
    if what == "evaluation":
        result = original.attempts[n - 1].result
        recorded = Attempt(n=n, result=result, recorded_from=of)
        return state.model_copy(
            update={**update, "attempts": [*kept, recorded], "status": "evaluating"}
        )
    attempts = [*kept, Attempt(n=n)]
    return state.model_copy(update={**update, "attempts": attempts, "status": "working"})


def failed(state: LoopState, code: str, error: str) -> LoopState:
    if state.status in TERMINAL_STATES:
        return state
    return _fail(state, code, error, state.decision, state.usage)


def _fail(
    state: LoopState,
    code: str,
    error: str,
    decision: OrchestratorDecision | None,
    usage: Usage,
) -> LoopState:
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


def on_result(
    state: LoopState,
    result: WorkerResult,
    approval_ttl: float = 3600,
    operators: tuple[str, ...] = (),
) -> LoopState:
    cur = state.current
    if state.status != "working" or cur is None or cur.n != result.attempt or cur.result:
        return state  # stale or duplicate
    attempts = [*state.attempts[:-1], cur.model_copy(update={"result": result})]
    state = state.model_copy(update={"attempts": attempts, "usage": state.usage + result.usage})
    if result.clarification_questions and state.rounds < MAX_CLARIFICATION_ROUNDS:
        return _park(state, result.clarification_questions)
    if result.frontend is not None:  # the model called the client's own tools
        return frontend.asked(state, result.frontend)
    if result.approval is not None:
        return approval_asked(state, result.approval, cur.n, approval_ttl, operators)
    if result.budget_stop is not None:  # the worker stopped itself before a call past it
        return out_of_budget(state, f"Note: this request stopped at its {result.budget_stop}.")
    if not result.success:
        if result.retryable and cur.n < state.max_attempts:
            return _next_attempt(state)
        if best(state) is not None:
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


def on_verdict(state: LoopState, event: VerdictIssued) -> LoopState:
    cur = state.current
    if state.status != "evaluating" or cur is None or cur.n != event.attempt or cur.verdict:
        return state
    if event.error:
        unjudged = {"verdict_error": event.error, "verdict_at": event.ts}
        attempts = [*state.attempts[:-1], cur.model_copy(update=unjudged)]
        if event.budget_stop is not None:  # the evaluator stopped before a call past it
            usage = state.usage + event.usage
            state = state.model_copy(update={"attempts": attempts, "usage": usage})
            return out_of_budget(state, f"Note: this request stopped at its {event.budget_stop}.")
        return state.model_copy(update={"attempts": attempts, "status": "partial"})
    judged = {"verdict": event.verdict, "verdict_at": event.ts, "verdict_usage": event.usage}
    attempts = [*state.attempts[:-1], cur.model_copy(update=judged)]
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


def approval_asked(
    state: LoopState, ask: ApprovalAsk, attempt: int, ttl: float, operators: tuple[str, ...] = ()
) -> LoopState:
    """Park the request on the approval `ask` opens (or fail it, when it may ask no more)."""
    req = state.request
    error = asking.refusal(state.approvals, ask)
    if error is not None:
        failure = RequestFailed(
            request_id=req.request_id, session_id=req.session_id, code="worker_failed", error=error
        )
        return state.model_copy(update={"status": "failed", "failure": failure})
    approval = asking.opened(req, ask, attempt, ttl, operators)
    return state.model_copy(update={"status": "awaiting_approval", "approval": approval})


def approval_decided(state: LoopState, approval: Approval) -> LoopState:
    """Resume with the decided approval: the next attempt's worker acts on it (sends the
    approved arguments, or reports the decline). Anything else is stale and ignored."""
    if state.status != "awaiting_approval" or not asking.answers(state.approval, approval):
        return state
    n = len(state.attempts) + 1
    return state.model_copy(
        update={
            "status": "working",
            "approval": None,
            "approvals": [*state.approvals, approval],
            "attempts": [*state.attempts, Attempt(n=n, approval_id=approval.approval_id)],
            "max_attempts": state.max_attempts + 1,
        }
    )


def _park(state: LoopState, questions: list[str]) -> LoopState:
    qs = [Question(id=f"q{i + 1}", question=q) for i, q in enumerate(questions) if q.strip()]
    if not qs:
        qs = [Question(id="q1", question="Could you tell me more about what you need?")]
    return state.model_copy(update={"status": "awaiting_clarification", "questions": qs})


def answered(state: LoopState, event: ClarificationAnswered) -> LoopState:
    """Resume a parked request with the user's answers (a clarification does not use up an
    attempt). Answers to a request that is not parked are ignored."""
    if state.status != "awaiting_clarification":
        return state
    if state.waiting_tools:  # the client's results of its tools' calls
        return _next_attempt(frontend.answered(state, event))
    pairs, said = [], []  # the questions with their answers; the user's words alone
    for q in state.questions:
        answer = event.answers.get(q.id)
        if answer:
            pairs.append(f"Q: {q.question} A: {answer}")
            said.append(answer)
    if event.message.strip():
        asked = " / ".join(q.question for q in state.questions)
        pairs.append(f"Q: {asked} A: {event.message.strip()}")
        said.append(event.message.strip())
    if event.additional_context:
        pairs.append(f"Additional context from the user: {event.additional_context}")
        said.append(event.additional_context)
    state = state.model_copy(
        update={
            "clarifications": [*state.clarifications, *pairs],
            "answers": [*state.answers, *said],
            "questions": [],
            "rounds": state.rounds + 1,
            "max_attempts": state.max_attempts + 1,
        }
    )
    return _next_attempt(state)


def cancelled(state: LoopState, reason: str) -> LoopState:
    if state.status in TERMINAL_STATES:
        return state
    return state.model_copy(update={"status": "cancelled", "cancel_reason": reason})


def attempt_started(state: LoopState, n: int, span_id: str, started_ns: int) -> LoopState:
    """Remember the trace span of attempt n the first time it is dispatched."""
    cur = state.current
    if cur is None or cur.n != n or cur.span_id is not None:
        return state
    attempts = [
        *state.attempts[:-1],
        cur.model_copy(update={"span_id": span_id, "started_ns": started_ns}),
    ]
    return state.model_copy(update={"attempts": attempts})


def _next_attempt(state: LoopState) -> LoopState:
    n = len(state.attempts) + 1
    return state.model_copy(
        update={"attempts": [*state.attempts, Attempt(n=n)], "status": "working"}
    )


def _finish_partial(state: LoopState) -> LoopState:
    return state.model_copy(update={"status": "partial"})


def stopped(state: LoopState, usage: Usage, note: str) -> LoopState:
    """The update that ends a request whose decision the budget stopped: the usage of the calls
    made counted, the note naming the limit."""
    return out_of_budget(state.model_copy(update={"usage": state.usage + usage}), note)


def out_of_budget(state: LoopState, note: str) -> LoopState:
    """A budget ran out before the next call: end with the best answer so far (partial), or,
    with none, fail; either way saying which limit."""
    if state.status in TERMINAL_STATES:
        return state
    if best(state) is not None:
        return state.model_copy(update={"status": "partial", "budget_note": note})
    failed = _fail(
        state, "budget_exhausted", note.removeprefix("Note: "), state.decision, state.usage
    )
    return failed.model_copy(update={"budget_note": note})
