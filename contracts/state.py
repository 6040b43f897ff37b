"""Records kept in JetStream KV that more than one service reads: a session's record and a
request's status (the read model behind the workflows API and reconnect)."""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, Field

from contracts.base import Model, Turn, utcnow
from contracts.decisions import Question, WorkerType

WorkflowStatus = Literal[
    "queued",
    "planning",
    "awaiting_clarification",
    "researching",
    "synthesizing",
    "validating",
    "completed",
    "partial",
    "failed",
    "cancelled",
]
FINAL_STATUSES: frozenset[str] = frozenset({"completed", "partial", "failed", "cancelled"})


class SessionRecord(Model):
    """A session (key: hash of the scoped session id) in the `sessions` bucket."""

    turns: list[Turn] = Field(default_factory=list, description="Turns, newest last.")
    parked: str | None = Field(
        default=None, description="A request awaiting this session's clarification answers."
    )
    undelivered: list[str] = Field(
        default_factory=list,
        description="Requests that ended (or asked) while no client of the session saw it.",
    )


class RequestStatus(Model):
    """One request's status (key: request id) in the `status` bucket."""

    request_id: str = Field(description="The request.")
    session_id: str = Field(description="Its scoped session.")
    principal: str = Field(default="anonymous", description="Who owns it.")
    text: str = Field(description="The user's message.")
    success_criteria: str | None = Field(default=None, description="The user's criteria.")
    status: WorkflowStatus = Field(description="Where the request is.")
    detail: str = Field(default="", description="Human-readable detail of the status.")
    worker_type: WorkerType | None = Field(default=None, description="Chosen worker kind.")
    attempt: int = Field(default=0, ge=0, description="Current attempt.")
    clarification_questions: list[Question] = Field(
        default_factory=list, description="Open questions, when awaiting clarification."
    )
    final_output: str | None = Field(default=None, description="The answer, once done.")
    error: str | None = Field(default=None, description="Why it failed, if it did.")
    cached: bool = Field(default=False, description="Answered from the semantic cache.")
    trace_id: str | None = Field(default=None, description="OpenTelemetry trace id (hex).")
    created_at: AwareDatetime = Field(default_factory=utcnow, description="Accepted at.")
    updated_at: AwareDatetime = Field(default_factory=utcnow, description="Last change.")
    completed_at: AwareDatetime | None = Field(default=None, description="Ended at.")
