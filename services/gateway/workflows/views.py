"""How a request's record reads through the workflows API: the workflow seed's shapes
(`final_output.response`, `state.chat_history`, `state.user_request`, ...) with Sidekick's own
information in added fields."""

from __future__ import annotations

from typing import Any

from contracts import RequestCompleted, RequestRecord, Turn
from contracts.http import ChatTurn, FinalOutput, WorkflowState, WorkflowView
from services.gateway.core.approving import waiting_on
from services.gateway.core.intake import unscoped
from services.runtime.requests.lifecycle import PARKED
from services.runtime.requests.sessions import asked_text

# What a workflow's state shows of its record as the record has it.
_KEPT = {
    "status",
    "created_at",
    "updated_at",
    "clarification_questions",
    "approvals",
    "text",
    "success_criteria",
    "worker_type",
    "attempt",
    "detail",
    "error",
    "trace_id",
    "cached",
}


def workflow_session(principal: str, workflow_id: str) -> str:
    """A workflow's own session (its chat turns and follow-up questions live there)."""
    return f"{principal}/workflow-{workflow_id}"


def is_workflow(record: RequestRecord) -> bool:
    """The request that started a workflow (not a chat turn inside its session)."""
    return record.session_id == workflow_session(record.principal, record.request_id)


def chat_history(record: RequestRecord, turns: list[Turn] | None = None) -> list[ChatTurn]:
    """The conversation as the seed's page shows it: the session's turns when known (questions
    and answers, follow-up chat), else what the record alone says."""
    history = [ChatTurn(role=t.role, content=t.content) for t in turns or []]
    if not history:
        history.append(ChatTurn(role="user", content=record.text))
    if record.state in PARKED and record.clarification_questions:
        asked = ChatTurn(role="assistant", content=asked_text(record.clarification_questions))
        if history[-1] != asked:
            history.append(asked)
    elif record.final_output is not None:
        answer = Turn(role="assistant", content=record.final_output, request_id=record.request_id)
        if answer not in (turns or []):
            history.append(ChatTurn(role="assistant", content=record.final_output))
    return history


def final_output(record: RequestRecord) -> FinalOutput | None:
    done = record.outcome
    if not isinstance(done, RequestCompleted):
        return None
    return FinalOutput(
        response=done.output,
        citations=[s.url for s in done.sources],
        sources=list(done.sources),
        status=done.status,
        score=done.score,
    )


def spend(record: RequestRecord) -> dict[str, Any]:
    """The usage and cost of a request that ended with an answer (its end's)."""
    done = record.outcome
    if not isinstance(done, RequestCompleted):
        return {}
    return {
        "usage": done.usage,
        "cost_usd": done.cost_usd,
        "usage_estimated": done.usage_estimated,
    }


def view(record: RequestRecord, turns: list[Turn] | None = None) -> WorkflowView:
    return WorkflowView(
        workflow_id=record.request_id,
        status=record.status,
        state=WorkflowState(
            workflow_id=record.request_id,
            user_request=record.text,
            chat_history=chat_history(record, turns),
            approval=waiting_on(record) if record.state == "awaiting_approval" else None,
            session=unscoped(record.principal, record.session_id),
            **record.model_dump(include=_KEPT),
            **spend(record),
        ),
        created_at=record.created_at,
        updated_at=record.updated_at,
        completed_at=record.completed_at,
        final_output=final_output(record),
    )
