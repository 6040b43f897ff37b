"""The timeline built from a request's record alone (no broker): what the record no longer
holds is said in an entry, never left out."""

from __future__ import annotations

import pytest

from contracts import RequestCompleted, Usage
from contracts.base import ToolUse
from contracts.decisions import OrchestratorDecision
from contracts.events import RequestRouted
from contracts.state import Attempt, LoopState
from services.gateway.requests.timeline import build
from tests.support.results import ended_record, succeeded

pytestmark = pytest.mark.fast


def free(_: Usage) -> float:
    return 0.0


def ended(route: str = "orchestrated") -> RequestCompleted:
    return RequestCompleted(
        request_id="r1", session_id="alice/s1", status="completed", output="done", route=route
    )


def test_an_orchestrated_end_without_its_loop_says_the_steps_are_not_available() -> None:
    timeline = build(ended_record(outcome=ended()), "s1", free)
    steps = [e.step for e in timeline.entries]
    assert steps == ["accepted", "unavailable", "ended"]
    assert "not in this request's record" in timeline.entries[1].detail


def test_a_direct_answer_is_accepted_answered_and_ended() -> None:
    timeline = build(ended_record(outcome=ended("direct")), "s1", free)
    assert [e.step for e in timeline.entries] == ["accepted", "direct", "ended"]
    assert timeline.route == "direct"


def test_tool_calls_past_those_kept_are_said_to_be_no_longer_available() -> None:
    routed = RequestRouted(
        request_id="r1", session_id="alice/s1", message="search the tides", reason="tools"
    )
    use = ToolUse(call_id="c1", name="web_search", arguments="{}", result="ok", ok=True, attempt=1)
    result = succeeded(
        "r1", "alice/s1", "TOOLS", "done", usage=Usage(tool_calls=3), tool_calls=[use]
    )
    decision = OrchestratorDecision(
        worker_type="TOOLS", task_description="look", parameters=[], success_criteria="ok"
    )
    loop = LoopState(
        request=routed,
        max_attempts=3,
        status="completed",
        decision=decision,
        attempts=[Attempt(n=1, result=result)],
    )
    timeline = build(ended_record(outcome=ended(), loop=loop), "s1", free)
    (attempt,) = [e for e in timeline.entries if e.step == "attempt"]
    assert attempt.tool_calls == [use]
    assert "3 tool calls made; 1 of them kept here" in attempt.detail
    # Its start was not recorded: shown at its result's time, with no duration guessed.
    assert attempt.at == result.ts and attempt.duration_ms is None
