"""The attempt loop's part for a client's own tools (AG-UI frontend tools), as plain logic: the
TOOLS worker stopped because the model called tools the client runs (`asked`: the request
parks, waiting for the client, with the conversation so far), and the client's results came
(`answered`: they join the conversation, which the next attempt goes on from). The gateway lets
exactly one answer through (services/gateway/core/answers.py); a stale answer changes nothing."""

from __future__ import annotations

from contracts import ClarificationAnswered, Question, RequestFailed
from contracts.frontend import FrontendStop, LoopMessage
from services.orchestrator.state import MAX_TOOL_ROUNDS, LoopState

NO_RESULT = "ERROR: the app sent no result for this call."


def asked(state: LoopState, stop: FrontendStop) -> LoopState:
    """Park the request on the client's tool calls (or fail it past MAX_TOOL_ROUNDS)."""
    req = state.request
    if state.tool_rounds >= MAX_TOOL_ROUNDS:
        error = (
            f"The model called the app's tools {MAX_TOOL_ROUNDS} times in this request without "
            "finishing; Sidekick stopped it there."
        )
        failure = RequestFailed(
            request_id=req.request_id, session_id=req.session_id, code="worker_failed", error=error
        )
        return state.model_copy(update={"status": "failed", "failure": failure})
    names = ", ".join(dict.fromkeys(c.name for c in stop.calls))
    question = Question(
        id="tools", question=f"Waiting for your app to run {names} and send the result."
    )
    return state.model_copy(
        update={
            "status": "awaiting_clarification",
            "questions": [question],
            "waiting_tools": list(stop.calls),
            "transcript": list(stop.transcript),
        }
    )


def answered(state: LoopState, event: ClarificationAnswered) -> LoopState:
    """The client's results joined to the conversation, the wait over (a clarification's
    bookkeeping for an attempt: one more allowed, as for any answer). The caller starts the
    next attempt."""
    results = {r.call_id: r.content for r in event.tool_results}
    messages = [
        LoopMessage(role="tool", tool_call_id=c.call_id, content=results.get(c.call_id, NO_RESULT))
        for c in state.waiting_tools
    ]
    return state.model_copy(
        update={
            "transcript": [*state.transcript, *messages],
            "waiting_tools": [],
            "questions": [],
            "tool_rounds": state.tool_rounds + 1,
            "max_attempts": state.max_attempts + 1,
        }
    )
