"""The gateway's HTTP API bodies: what clients send (lenient about unknown keys, strict about
types) and what they get back. The workflows API keeps the workflow seed's shapes; Sidekick's
extra information is in added fields."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, cast

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    RootModel,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
)

from contracts import fields
from contracts.approvals import Approval as ActionApproval
from contracts.base import Model, Source, Turn, Usage, WorkflowStatus
from contracts.decisions import Question, WorkerType
from contracts.email import OutboxEntry
from contracts.frames import ErrorBody

# Times as Python writes them ("+00:00"), as this API always has.
IsoTime = Annotated[
    AwareDatetime, PlainSerializer(datetime.isoformat, return_type=str, when_used="json")
]
# Fields several bodies of the workflows API carry (a workflow's state and its view, what
# accepting or resuming one answers).
WorkflowId = Annotated[str, Field(description="The workflow.")]
Note = Annotated[str, Field(description="A human-readable note.")]
Status = Annotated[WorkflowStatus, Field(description="Its status.")]
AcceptedAt = Annotated[IsoTime, Field(description="Accepted at.")]
LastChange = Annotated[IsoTime, Field(description="Last change.")]


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
    detail: list[ValidationDetail] | str | None = Field(
        default=None,
        description="As FastAPI answers: each validation error (422), else the message.",
    )

    def wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


# --- the page's API ----------------------------------------------------------------------


class PageConfig(HttpBody):
    auth_required: bool = Field(description="Whether a bearer token is needed.")
    max_message_chars: int = Field(description="The longest message accepted.")
    model_notice: str | None = Field(
        default=None,
        description="A line the page shows about the model, e.g. that it is a tiny local "
        "demonstration model (`sidekick up --local-model`); null when there is none.",
    )


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
# The workflow seed's shapes (its clients read `final_output.response`, `state.chat_history`,
# `state.user_request`, `state.created_at`, and a list from GET /api/workflows/); Sidekick's
# own information is in added fields.


class CreateWorkflow(Body):
    text: StrictStr = Field(min_length=10, description="What to do (at least 10 characters).")
    skip_cache: StrictBool = Field(default=False, description="Bypass the semantic cache.")
    success_criteria: StrictStr | None = Field(default=None, description="How to judge it.")


Approval = Literal["approved", "needs_changes", "rejected"]


class WorkflowFeedback(Body):
    responses: dict[StrictStr, StrictStr] = Field(
        default_factory=dict,
        description="Answers by question id; the key 'clarification' answers all of them at once.",
    )
    ratings: dict[StrictStr, StrictInt | StrictFloat | StrictStr] | None = Field(
        default=None, description="Ratings, passed on as context."
    )
    approval: StrictBool | Approval | None = Field(
        default=None,
        description="The seed's approval word (or true/false): it decides an action waiting "
        "for approval, and is passed on as context otherwise.",
    )
    approval_id: StrictStr | None = Field(
        default=None,
        description="The approval decided (from the workflow's approval); a stale one is refused.",
    )
    additional_context: StrictStr | None = Field(default=None, description="Anything else.")


class WorkflowAccepted(HttpBody):
    workflow_id: str = Field(description="The new workflow's id (a cache hit: the old one's).")
    status: WorkflowStatus = Field(description="'started', or 'completed' for a cache hit.")
    message: Note


class WorkflowResumed(HttpBody):
    workflow_id: WorkflowId
    status: str = Field(description="'resumed'.")
    message: Note


class ChatTurn(Model):
    role: str = Field(description="'user' or 'assistant'.")
    content: str = Field(description="What was said.")


class FinalOutput(Model):
    response: str = Field(description="The answer (markdown).")
    citations: list[str] = Field(description="Addresses of the sources it cites.")
    sources: list[Source] = Field(description="The sources, with titles and snippets.")
    status: Literal["completed", "partial"] = Field(
        description="'partial' when the attempts ran out before the criteria were met."
    )
    score: int | None = Field(description="The evaluator's last score.")


class WorkflowState(Model):
    workflow_id: WorkflowId
    user_request: str = Field(description="The request, as the user wrote it.")
    status: Status
    created_at: AcceptedAt
    updated_at: LastChange
    chat_history: list[ChatTurn] = Field(
        description="The conversation: the request, questions and answers, the final answer, "
        "and any chat about it."
    )
    clarification_questions: list[Question] = Field(description="Open questions.")
    approval: ActionApproval | None = Field(
        default=None,
        description="The action waiting for approval (arguments exactly as they will run); "
        "decide it with /feedback's approval word.",
    )
    approvals: list[ActionApproval] = Field(
        default_factory=list, description="Actions decided so far, each with who, when, digest."
    )
    text: str = Field(description="The request (as user_request).")
    success_criteria: str | None = Field(description="The user's criteria.")
    session: str = Field(description="The workflow's session (unscoped).")
    worker_type: WorkerType | None = Field(description="The worker kind chosen.")
    attempt: int = Field(description="The current attempt.")
    detail: str = Field(description="Human-readable detail of the status.")
    error: fields.WhyFailed
    trace_id: fields.TraceId
    cached: bool = Field(description="Answered from the semantic cache.")
    usage: Usage | None = Field(
        default=None,
        description="Total model usage, once it ended with an answer (as its end frame's).",
    )
    cost_usd: float | None = Field(
        default=None, description="The usage priced by the price table (USD), once ended."
    )
    usage_estimated: bool = Field(
        default=False,
        description="True when some of the usage (and so the cost) was counted by Sidekick "
        "because a server reported none: an estimate.",
    )


class WorkflowView(HttpBody):
    workflow_id: WorkflowId
    status: Status
    state: WorkflowState = Field(description="Where it is.")
    created_at: AcceptedAt
    updated_at: LastChange
    completed_at: IsoTime | None = Field(description="Ended at.")
    final_output: FinalOutput | None = Field(description="The answer, once done.")


class WorkflowList(RootModel[list[WorkflowView]]):
    """The caller's workflows, newest first (a JSON list, as the seed answers)."""

    model_config = ConfigDict(frozen=True)

    def wire(self) -> list[Any]:
        return cast(list[Any], self.model_dump(mode="json"))


class WorkflowChat(Body):
    message: StrictStr = Field(min_length=1, description="A question about the workflow.")


class WorkflowChatReply(HttpBody):
    response: str = Field(description="The answer.")
    history: list[ChatTurn] = Field(description="The workflow's conversation, with this turn.")
    request_id: str = Field(description="The request that answered it.")


class PreferenceIn(Body):
    key: StrictStr = Field(min_length=1, max_length=100, description="The preference's name.")
    value: StrictStr = Field(max_length=2000, description="Its value.")


class Preference(HttpBody):
    key: str = Field(description="The preference's name.")
    value: str = Field(description="Its value.")


class Preferences(HttpBody):
    preferences: dict[str, str] = Field(description="The caller's preferences by name.")


class PreferencesRecord(Model):
    """A principal's preferences in the `preferences` bucket."""

    values: dict[str, str] = Field(default_factory=dict, description="By name.")


class Health(HttpBody):
    status: Literal["healthy", "unhealthy"] = Field(description="Whether it can take work.")
    service: str = Field(description="'sidekick'.")
    nats: Literal["connected", "down"] = Field(description="The bus connection.")
    workflow_engine: Literal["configured", "unconfigured"] = Field(
        description="Whether workflows can be accepted (the bus is there)."
    )


class SessionSummary(Model):
    uuid: str = Field(description="The conversation's session uuid.")
    title: str = Field(description="Its first message (shortened).")
    updated_at: IsoTime = Field(description="Its last activity.")
    requests: int = Field(description="How many of the scanned requests belong to it.")


class SessionList(HttpBody):
    sessions: list[SessionSummary] = Field(description="The caller's conversations, newest first.")


# --- operators' approvals ----------------------------------------------------------------


class ApprovalList(HttpBody):
    approvals: list[ActionApproval] = Field(
        description="Pending approvals the caller may decide, oldest first."
    )


class DecideApproval(Body):
    decision: StrictStr = Field(
        description="'approve' or 'deny' (or yes/no and the seed's approval words)."
    )


class ApprovalDecided(HttpBody):
    approval: ActionApproval = Field(description="The approval, with the decision recorded.")
    request_id: str = Field(description="The request it belongs to.")
    status: str = Field(description="The request's status after the decision.")
