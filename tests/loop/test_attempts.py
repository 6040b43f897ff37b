"""The attempt loop's logic, without a broker."""

from __future__ import annotations

from contracts import (
    ClarificationAnswered,
    OrchestratorDecision,
    Parameter,
    RequestRouted,
    Usage,
    Verdict,
    VerdictIssued,
    WorkerResult,
)
from contracts.approvals import ApprovalAsk, digest_of
from services.orchestrator import loop
from services.orchestrator.loop import Dispatch, Evaluate, Finish
from services.runtime.approvals.asking import MAX_APPROVALS

WORKERS = {"GENERAL", "SEARCH"}


def routed(**kw: object) -> RequestRouted:
    return RequestRouted.model_validate(
        {"request_id": "r1", "session_id": "s1", "message": "find it", "reason": "search", **kw}
    )


def decision(worker: str = "SEARCH") -> OrchestratorDecision:
    return OrchestratorDecision(
        worker_type=worker,
        task_description="find it",
        parameters=[Parameter(name="query", value="it")],
        success_criteria="generated criteria",
    )


def result(n: int, output: str = "out", success: bool = True, **kw: object) -> WorkerResult:
    return WorkerResult.model_validate(
        {
            "request_id": "r1",
            "session_id": "s1",
            "attempt": n,
            "worker_type": "SEARCH",
            "success": success,
            "output": output,
            **kw,
        }
    )


def judged(n: int, passed: bool, feedback: str = "fb") -> VerdictIssued:
    return VerdictIssued(
        request_id="r1",
        session_id="s1",
        attempt=n,
        verdict=Verdict(
            passed=passed,
            score=80 if passed else 20,
            feedback=feedback,
            suggestions=["s"],
            user_input_needed=False,
            questions=[],
        ),
    )


def started(**kw: object) -> loop.LoopState:
    return loop.decided(loop.start(routed(**kw), 3), decision(), Usage(), WORKERS)


def test_a_decision_dispatches_attempt_one_with_its_parameters() -> None:
    (msg,) = loop.next_messages(started())
    assert isinstance(msg, Dispatch)
    assert msg.task.attempt == 1 and msg.task.parameters == {"query": "it"}
    assert msg.task.feedback is None


def test_the_users_criteria_win_over_generated_ones() -> None:
    (msg,) = loop.next_messages(started(success_criteria="mine"))
    assert isinstance(msg, Dispatch) and msg.task.success_criteria == "mine"


def test_a_result_is_sent_for_evaluation_and_a_pass_completes() -> None:
    s = loop.on_result(started(), result(1, "good"))
    (msg,) = loop.next_messages(s)
    assert isinstance(msg, Evaluate) and msg.request.output == "good"
    s = loop.on_verdict(s, judged(1, True))
    (fin,) = loop.next_messages(s)
    assert isinstance(fin, Finish) and fin.event.kind == "request.completed"
    assert fin.event.output == "good" and fin.event.status == "completed"


def test_retry_carries_feedback_suggestions_and_previous_output() -> None:
    s = loop.on_result(started(), result(1, "draft"))
    s = loop.on_verdict(s, judged(1, False, "too short"))
    (msg,) = loop.next_messages(s)
    assert isinstance(msg, Dispatch)
    assert msg.task.attempt == 2
    assert msg.task.feedback == "too short"
    assert msg.task.suggestions == ["s"]
    assert msg.task.previous_output == "draft"


def test_out_of_attempts_returns_the_last_output_with_the_feedback() -> None:
    s = started()
    for n in (1, 2, 3):
        s = loop.on_result(s, result(n, f"out{n}"))
        s = loop.on_verdict(s, judged(n, False, f"missing {n}"))
    (fin,) = loop.next_messages(s)
    assert isinstance(fin, Finish)
    event = fin.event
    assert event.kind == "request.completed" and event.status == "partial"
    assert event.output.startswith("out3") and "missing 3" in event.output


def test_duplicate_and_stale_events_change_nothing() -> None:
    s = loop.on_result(started(), result(1))
    assert loop.on_result(s, result(1, "other")) == s
    s2 = loop.on_verdict(s, judged(1, False))
    assert loop.on_verdict(s2, judged(1, True)) == s2
    assert loop.on_result(s2, result(1)) == s2


def test_none_is_a_clear_refusal_and_an_unknown_worker_a_clear_error() -> None:
    s = loop.decided(loop.start(routed(), 3), decision("NONE"), Usage(), WORKERS)
    (fin,) = loop.next_messages(s)
    assert isinstance(fin, Finish) and fin.event.kind == "request.failed"
    assert fin.event.code == "refused"
    s = loop.decided(loop.start(routed(), 3), decision("EMAIL"), Usage(), WORKERS)
    (fin,) = loop.next_messages(s)
    assert fin.event.code == "unknown_worker"  # type: ignore[union-attr]
    assert "EMAIL" in fin.event.error  # type: ignore[union-attr]


def test_a_failed_worker_with_no_output_fails_the_request_with_its_error() -> None:
    s = loop.on_result(started(), result(1, "", success=False, error="no API key"))
    (fin,) = loop.next_messages(s)
    assert fin.event.kind == "request.failed"  # type: ignore[union-attr]
    assert "no API key" in fin.event.error  # type: ignore[union-attr]


def test_a_retryable_worker_failure_tries_again() -> None:
    s = loop.on_result(started(), result(1, "", success=False, error="503", retryable=True))
    (msg,) = loop.next_messages(s)
    assert isinstance(msg, Dispatch) and msg.task.attempt == 2
    assert "503" in (msg.task.feedback or "")


def test_no_evaluator_completes_on_the_first_good_result() -> None:
    s = loop.on_result(started(use_evaluator=False), result(1, "x"))
    (fin,) = loop.next_messages(s)
    assert isinstance(fin, Finish) and fin.event.kind == "request.completed"


def test_an_evaluator_failure_returns_the_output_marked_unchecked() -> None:
    s = loop.on_result(started(), result(1, "x"))
    s = loop.on_verdict(
        s, VerdictIssued(request_id="r1", session_id="s1", attempt=1, error="model down")
    )
    (fin,) = loop.next_messages(s)
    assert isinstance(fin, Finish) and fin.event.kind == "request.completed"
    assert fin.event.status == "partial" and "model down" in fin.event.output


def test_an_evaluator_stopped_by_its_budget_ends_partial_naming_the_limit() -> None:
    s = loop.on_result(started(), result(1, "x", usage=Usage(input_tokens=5, calls=1)))
    note = "model calls budget (1 of the 1 left to this request)"
    stop = VerdictIssued(
        request_id="r1",
        session_id="s1",
        attempt=1,
        error=f"stopped before its next model call: the request's {note} is spent.",
        usage=Usage(input_tokens=11, output_tokens=7, calls=1),
        budget_stop=note,
    )
    s = loop.on_verdict(s, stop)
    (fin,) = loop.next_messages(s)
    assert isinstance(fin, Finish) and fin.event.kind == "request.completed"
    assert fin.event.status == "partial"
    assert fin.event.output.startswith("x")
    assert fin.event.output.endswith(f"Note: this request stopped at its {note}.")
    assert (s.usage.input_tokens, s.usage.output_tokens, s.usage.calls) == (16, 7, 2)


def test_a_sent_email_is_not_judged_again_so_it_is_never_sent_twice() -> None:
    s = loop.decided(loop.start(routed(), 3), decision("EMAIL"), Usage(), {"EMAIL"})
    email = WorkerResult.model_validate(
        {
            "request_id": "r1",
            "session_id": "s1",
            "attempt": 1,
            "worker_type": "EMAIL",
            "success": True,
            "output": "Sent to a@example.com",
        }
    )
    (fin,) = loop.next_messages(loop.on_result(s, email))
    assert isinstance(fin, Finish) and fin.event.kind == "request.completed"


def test_a_planner_question_parks_the_request_and_an_answer_resumes_it() -> None:
    asking = result(1, "I need details", clarification_questions=["Which year?"])
    s = loop.on_result(started(), asking)
    (park,) = loop.next_messages(s)
    assert isinstance(park, Finish) and park.event.kind == "request.clarification"
    assert park.event.source == "planner"
    assert [q.question for q in park.event.questions] == ["Which year?"]
    resumed = loop.answered(
        s,
        ClarificationAnswered(request_id="r1", session_id="s1", answers={"q1": "1999"}),
    )
    (msg,) = loop.next_messages(resumed)
    assert isinstance(msg, Dispatch) and msg.task.attempt == 2
    assert msg.task.clarifications == ["Q: Which year? A: 1999"]


def _ask(action: str, n: int) -> WorkerResult:
    arguments = {"value": str(n)}
    approval = ApprovalAsk(
        action=action, arguments=arguments, digest=digest_of(action, arguments), reason="asks"
    )
    return result(n, success=False, output="", approval=approval)


def _approve_each(s: loop.LoopState, actions: list[str]) -> loop.LoopState:
    """Each attempt's worker asks about the next action; each is approved in turn."""
    for action in actions:
        n = len(s.attempts)
        s = loop.on_result(s, _ask(action, n))
        if s.status != "awaiting_approval":
            return s
        assert s.approval is not None
        decided = s.approval.model_copy(update={"state": "approved"})
        s = loop.approval_decided(s, decided)
    return s


def test_approvals_are_bounded_per_action_and_per_request() -> None:
    # Three rounds of one action (a model changing what it asks after each yes), then stopped.
    s = _approve_each(started(), ["notify", "notify", "notify", "notify"])
    assert s.status == "failed" and s.failure is not None
    assert "approval of notify 3 times" in s.failure.error and len(s.approvals) == 3
    # Different actions each asking are not that: they go on up to the request's bound.
    actions = [f"mcp__tool{i}" for i in range(MAX_APPROVALS)] + ["python_run"]
    s = _approve_each(started(), actions)
    assert len(s.approvals) == MAX_APPROVALS and s.failure is not None
    assert f"asked for {MAX_APPROVALS} approvals" in s.failure.error
    assert "python_run was not done" in s.failure.error


def test_a_cancel_ends_the_request_and_later_events_change_nothing() -> None:
    s = loop.cancelled(started(), "stop")
    (fin,) = loop.next_messages(s)
    assert isinstance(fin, Finish) and fin.event.kind == "request.cancelled"
    assert loop.on_result(s, result(1)) == s
