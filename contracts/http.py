"""The gateway's HTTP API bodies: what clients send (lenient about unknown keys, strict about
types) and what they get back. The workflows API keeps the workflow seed's shapes; Sidekick's
extra information is in added fields."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
)

from contracts.base import Model, Turn, WorkflowStatus
from contracts.decisions import Question, WorkerType
from contracts.email import OutboxEntry
from contracts.frames import ErrorBody

# Times as Python writes them ("+00:00"), as this API always has.
IsoTime = Annotated[
    AwareDatetime, PlainSerializer(datetime.isoformat, return_type=str, when_used="json")
]


class HttpBody(BaseModel):
    """A response body, sent as `body.wire()`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class Body(BaseModel):
    """A request body: lenient about unknown keys (the seed's clients send extras)."""

    model_config = ConfigDict(frozen=True, extra="ignore")


# --- errors ------------------------------------------------------------------------------


class ValidationDetail(Model):
    loc: list[str | int] = Field(description="Where in the request, e.g. ['body', 'text'].")
    msg: str = Field(description="What is wrong there.")
    type: str = Field(description="Machine-readable kind of error.")


class ErrorResponse(HttpBody):
    error: ErrorBody = Field(description="The error.")
    detail: list[ValidationDetail] | None = Field(
        default=None, description="Each validation error, for 422 answers."
    )

    def wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


# --- the page's API ----------------------------------------------------------------------


class PageConfig(HttpBody):
    auth_required: bool = Field(description="Whether a bearer token is needed.")
    max_message_chars: int = Field(description="The longest message accepted.")


class OpenQuestion(Model):
    request_id: str = Field(description="The request waiting for answers.")
    text: str = Field(description="Its message.")
    questions: list[Question] = Field(description="What it asks.")


class SessionHistory(HttpBody):
    session: str = Field(description="The client's session uuid.")
    turns: list[Turn] = Field(description="Turns, oldest first.")
    parked: OpenQuestion | None = Field(description="A question still open, if any.")


class OutboxListing(HttpBody):
    note: str = Field(description="That this mail was not sent, and how to send mail.")
    entries: list[OutboxEntry] = Field(description="The caller's unsent mail, newest first.")


# --- the workflows API -------------------------------------------------------------------


class CreateWorkflow(Body):
    text: StrictStr = Field(min_length=1, description="What to do.")
    skip_cache: StrictBool = Field(default=False, description="Bypass the semantic cache.")
    success_criteria: StrictStr | None = Field(default=None, description="How to judge it.")


class WorkflowFeedback(Body):
    responses: dict[StrictStr, StrictStr] = Field(
        default_factory=dict, description="Answers by question id."
    )
    ratings: dict[StrictStr, StrictInt | StrictFloat | StrictStr] | None = Field(
        default=None, description="Ratings, passed on as context."
    )
    approval: StrictBool | None = Field(default=None, description="Approval, passed on.")
    additional_context: StrictStr | None = Field(default=None, description="Anything else.")


class WorkflowAccepted(HttpBody):
    workflow_id: str = Field(description="The new workflow's id.")
    status: WorkflowStatus = Field(description="Its status.")
    message: str = Field(description="A human-readable note.")


class WorkflowResumed(HttpBody):
    workflow_id: str = Field(description="The workflow.")
    status: str = Field(description="'resumed'.")
    message: str = Field(description="A human-readable note.")


class WorkflowState(Model):
    text: str = Field(description="The request.")
    success_criteria: str | None = Field(description="The user's criteria.")
    session: str = Field(description="The workflow's session (unscoped).")
    clarification_questions: list[Question] = Field(description="Open questions.")
    worker_type: WorkerType | None = Field(description="The worker kind chosen.")
    attempt: int = Field(description="The current attempt.")
    detail: str = Field(description="Human-readable detail of the status.")
    error: str | None = Field(description="Why it failed, if it did.")
    trace_id: str | None = Field(description="OpenTelemetry trace id (hex).")
    cached: bool = Field(description="Answered from the semantic cache.")


class WorkflowView(HttpBody):
    workflow_id: str = Field(description="The workflow.")
    status: WorkflowStatus = Field(description="Its status.")
    state: WorkflowState = Field(description="Where it is.")
    created_at: IsoTime = Field(description="Accepted at.")
    updated_at: IsoTime = Field(description="Last change.")
    completed_at: IsoTime | None = Field(description="Ended at.")
    final_output: str | None = Field(description="The answer, once done.")


class WorkflowSummary(Model):
    workflow_id: str = Field(description="The workflow.")
    status: WorkflowStatus = Field(description="Its status.")
    text: str = Field(description="The request.")
    created_at: IsoTime = Field(description="Accepted at.")
    updated_at: IsoTime = Field(description="Last change.")
    completed_at: IsoTime | None = Field(description="Ended at.")


class WorkflowList(HttpBody):
    workflows: list[WorkflowSummary] = Field(description="The caller's, newest first.")


class SessionSummary(Model):
    uuid: str = Field(description="The conversation's session uuid.")
    title: str = Field(description="Its first message (shortened).")
    updated_at: IsoTime = Field(description="Its last activity.")
    requests: int = Field(description="How many of the scanned requests belong to it.")


class SessionList(HttpBody):
    sessions: list[SessionSummary] = Field(description="The caller's conversations, newest first.")
