"""Every event of the request flow, and the discriminated union of all of them.

Flow: ChatRequested -> (frontline) StreamChunk* + RequestCompleted | RequestRouted
-> (orchestrator) WorkerTask -> (worker) WorkerResult
-> (orchestrator) EvaluationRequested -> (evaluator) VerdictIssued -> (orchestrator)
WorkerTask (retry) | RequestCompleted | RequestFailed. Progress events narrate the way.

The orchestrator's decision is no event of its own: it is kept in the request's loop state (in
the request's record, `RequestRecord.loop`: contracts/state.py) and told to clients and traces
by the `decided` Progress event (worker kind and task).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, TypeAdapter

from contracts import fields
from contracts import frontend as fe
from contracts.approvals import Approval, ApprovalAsk
from contracts.base import (
    Event,
    RecordStamp,
    SessionStamp,
    Source,
    TaskBudget,
    ToolUse,
    Turn,
    Usage,
)
from contracts.decisions import Verdict, WorkerType
from contracts.frontend import ContextItem, FrontendStop, FrontendTool, LoopMessage, ToolCall
from contracts.replay import Replay, model_field, replay_field, replay_of_field, tool_calls_field


class RequestOptions(Event):
    """Fields a user request carries from the gateway all the way to the orchestrator."""

    message: str = Field(description="The user's message.")
    success_criteria: str | None = Field(
        default=None, description="Criteria the user gave; they win over generated ones."
    )
    use_evaluator: bool = Field(default=True, description="Judge outputs before answering.")
    skip_cache: bool = Field(default=False, description="Bypass the semantic cache.")
    principal: str = Field(default="anonymous", description="Who sent the request.")
    reply_to: str | None = Field(default=None, description="A parked request this message answers.")
    planned: bool = Field(
        default=False,
        description="A workflow: the research pipeline plans it (it may ask the user first); "
        "never answered directly by the frontline.",
    )
    preferences: dict[str, str] = Field(
        default_factory=dict,
        description="The principal's standing preferences, for the planner (workflows).",
    )
    frontend_tools: list[FrontendTool] = fe.tools_field()
    context: list[ContextItem] = fe.context_field()
    replay: Replay | None = replay_field()


class ChatRequested(RequestOptions):
    """A user message accepted and acknowledged by the gateway."""

    kind: Literal["chat.requested"] = "chat.requested"
    history: list[Turn] = Field(
        default_factory=list,
        description="Earlier turns the client sent with its message (OpenAI-style clients send "
        "the whole conversation); when given, the agents see these, not the session's.",
    )
    session_turns: list[Turn] | None = Field(
        default=None,
        description="The session's recent turns when the message was sent on (as many as the "
        "agents see), so the frontline need not read the session; None: it reads them.",
    )
    session: SessionStamp | None = Field(
        default=None,
        description="The session's record and revision when the message was sent on: the "
        "frontline takes the history from it (not from `session_turns`) and writes the "
        "request's end into the session from it without reading it first.",
    )
    record: RecordStamp | None = Field(
        default=None, description="The request's record when sent (None: the frontline reads it)."
    )


class RequestRouted(RequestOptions):
    """The frontline decided the request needs the orchestrator."""

    kind: Literal["request.routed"] = "request.routed"
    reason: str = Field(description="Why the frontline routed it.")
    history: fields.RecentTurns = Field(default_factory=list)
    usage: Usage = Field(
        default_factory=Usage,
        description="The frontline's model usage for this request (its routing call): part of "
        "the usage the request's end shows; the frontline has counted it in the day and session.",
    )
    record: RecordStamp | None = Field(
        default=None, description="The gateway's stamp, passed on (None: the orchestrator reads)."
    )
    session: SessionStamp | None = Field(
        default=None,
        description="The session as the gateway sent it on, passed on: the orchestrator writes "
        "the request's end into the session from it (None, or moved since: it reads it).",
    )


class WorkerTask(Event):
    """One attempt's work for one worker kind."""

    kind: Literal["worker.task"] = "worker.task"
    attempt: int = Field(ge=1, description="Attempt number, from 1.")
    worker_type: WorkerType = Field(description="Which worker kind runs it.")
    message: fields.OriginalMessage
    task_description: str = Field(description="What to do.")
    parameters: dict[str, str] = Field(default_factory=dict, description="Named inputs.")
    success_criteria: str = Field(description="How the output will be judged.")
    feedback: fields.LastFeedback = None
    suggestions: list[str] = Field(default_factory=list, description="The last suggestions.")
    previous_output: str | None = Field(default=None, description="The last attempt's output.")
    history: fields.RecentTurns = Field(default_factory=list)
    clarifications: fields.Clarifications = Field(default_factory=list)
    answers: list[str] = Field(
        default_factory=list,
        description="The user's own words in those answers, without the questions (which a "
        "model wrote): with the message and the user's turns, all the user wrote.",
    )
    preferences: dict[str, str] = Field(
        default_factory=dict, description="The user's standing preferences (workflows)."
    )
    dispatch_token: fields.DispatchToken = None
    budget: TaskBudget | None = Field(
        default=None, description="What the request may still spend (none: no limit given)."
    )
    approval_id: str | None = Field(
        default=None,
        description="An approval decided for this request's action: the worker runs only the "
        "arguments whose digest it holds, or reports the decline.",
    )
    frontend_tools: list[FrontendTool] = fe.tools_field()
    context: list[ContextItem] = fe.context_field()
    transcript: list[LoopMessage] = fe.transcript_field()
    push: bool = Field(default=False, description="Progress goes on its push subject too.")
    replay_of: str | None = replay_of_field()
    model: str | None = model_field("worker")


class WorkerResult(Event):
    """What a worker produced for one attempt."""

    kind: Literal["worker.result"] = "worker.result"
    attempt: int = Field(ge=1, description="Attempt number the result answers.")
    worker_type: WorkerType = Field(description="Which worker kind produced it.")
    success: bool = Field(description="False when the worker could not do the task.")
    output: str = Field(default="", description="The worker's answer.")
    error: str | None = Field(default=None, description="Why it failed, when it did.")
    retryable: bool = Field(default=False, description="Whether a retry may succeed.")
    sources: list[Source] = Field(default_factory=list, description="Sources used.")
    usage: Usage = Field(default_factory=Usage, description="Model usage of this attempt.")
    clarification_questions: list[str] = Field(
        default_factory=list,
        description="Questions the user must answer before the task can be done (e.g. the "
        "research planner's); the request is parked until they are answered.",
    )
    dispatch_token: fields.AnswerToken = None
    approval: ApprovalAsk | None = Field(
        default=None,
        description="An action the worker may not take without a person's approval; the "
        "request is parked until it is approved or declined.",
    )
    budget_stop: str | None = Field(
        default=None,
        description="The limit of the task's budget that stopped the worker before its next "
        "model call (e.g. 'model calls budget (2 of the 2 left to this request)'); the "
        "request ends partial with its best answer (this output, when `success`) and a note "
        "naming it.",
    )
    frontend: FrontendStop | None = fe.stop_field()
    tool_calls: list[ToolUse] = tool_calls_field()


class EvaluationRequested(Event):
    """Ask the evaluator to judge one attempt's output."""

    kind: Literal["evaluation.requested"] = "evaluation.requested"
    attempt: int = Field(ge=1, description="Attempt number being judged.")
    worker_type: WorkerType = Field(description="Worker kind that produced the output.")
    message: fields.OriginalMessage
    task_description: str = Field(description="The task given to the worker.")
    success_criteria: str = Field(description="What to judge against.")
    output: str = Field(description="The worker's output.")
    sources: list[Source] = Field(default_factory=list, description="Sources the worker cited.")
    history: fields.RecentTurns = Field(default_factory=list)
    clarifications: fields.Clarifications = Field(default_factory=list)
    dispatch_token: fields.DispatchToken = None
    budget: TaskBudget | None = Field(
        default=None,
        description="What the request may still spend on this evaluation (its limits less its "
        "usage, no more tokens than the step was granted); checked before each of its model "
        "calls, a repair's too. None: unchecked.",
    )
    model: str | None = model_field("evaluator")


class VerdictIssued(Event):
    """The evaluator's verdict on one attempt."""

    kind: Literal["evaluation.verdict"] = "evaluation.verdict"
    attempt: int = Field(ge=1, description="Attempt number judged.")
    verdict: Verdict | None = Field(default=None, description="The judgement, if one was had.")
    error: str | None = Field(
        default=None, description="Why no judgement could be had (the model failed)."
    )
    usage: Usage = Field(default_factory=Usage, description="Model usage of the evaluation.")
    dispatch_token: fields.AnswerToken = None
    budget_stop: str | None = Field(
        default=None,
        description="The limit of the evaluation's budget that stopped the evaluator before "
        "its next model call (no verdict then); the request ends partial with the attempt's "
        "output and a note naming it.",
    )


class StreamChunk(Event):
    """A piece of the answer, streamed as the model produces it (core NATS)."""

    kind: Literal["stream.chunk"] = "stream.chunk"
    seq: int = Field(ge=0, description="Order of the chunk within the request.")
    text: str = Field(description="The text of the chunk.")


class Progress(Event):
    """A step of the request's way, for clients in events mode (core NATS)."""

    kind: Literal["progress"] = "progress"
    stage: fields.Stage
    detail: fields.StepDetail = ""
    attempt: fields.StepAttempt = None
    worker_type: fields.WorkerKind = None
    passed: fields.StepPassed = None
    score: fields.StepScore = None
    feedback: fields.StepFeedback = None
    suggestions: fields.StepSuggestions = Field(default_factory=list)
    workflow_status: fields.StepStatus = None
    tool: fields.StepTool = None


class RequestCompleted(Event):
    """The request's final answer."""

    kind: Literal["request.completed"] = "request.completed"
    status: Literal["completed", "partial"] = Field(
        description="'partial' when attempts ran out before a passing verdict."
    )
    output: str = Field(description="The answer shown to the user.")
    route: Literal["direct", "orchestrated", "cached"] = Field(description="How it was answered.")
    worker_type: fields.WorkerKind = None
    attempts: int = Field(default=0, ge=0, description="Attempts made.")
    score: fields.LastScore = None
    feedback: fields.LastFeedback = None
    sources: list[Source] = Field(default_factory=list, description="Sources of the answer.")
    usage: Usage = Field(default_factory=Usage, description="Total model usage.")
    cost_usd: float | None = Field(
        default=None,
        description="The usage priced by the price table (USD; see docs/budgets.md).",
    )
    usage_estimated: fields.UsageEstimated = False
    trace_id: fields.TraceId = None


class RequestFailed(Event):
    """The request ended without an answer; `error` says why in words a user can act on."""

    kind: Literal["request.failed"] = "request.failed"
    code: fields.FailureReason
    error: str = Field(description="What went wrong and what to do about it.")
    trace_id: fields.TraceId = None


class ClarificationRequested(Event):
    """The request is parked until the user answers these questions."""

    kind: Literal["request.clarification"] = "request.clarification"
    questions: fields.AskedQuestions
    source: Literal["evaluator", "planner"] = Field(description="Who asked.")
    attempt: int | None = Field(default=None, description="The attempt that needed input.")
    approval: Approval | None = Field(
        default=None, description="Set when the request waits for approval of an action."
    )
    tool_calls: list[ToolCall] = fe.calls_field()


class ClarificationAnswered(Event):
    """The user's answers to a parked request (`request_id` is the parked request)."""

    kind: Literal["request.answered"] = "request.answered"
    answers: dict[str, str] = Field(default_factory=dict, description="Answers by question id.")
    message: str = Field(default="", description="What the user wrote, as free text.")
    additional_context: str | None = Field(default=None, description="Anything else given.")
    approval_id: str | None = Field(
        default=None, description="The approval this answer decided (see the approvals bucket)."
    )
    tool_results: list[fe.ToolResult] = fe.results_field()


class CancelRequested(Event):
    """Stop this request at every hop."""

    kind: Literal["request.cancel"] = "request.cancel"
    reason: str = Field(default="cancelled by the user", description="Why.")


class RequestCancelled(Event):
    """The request ended because it was cancelled."""

    kind: Literal["request.cancelled"] = "request.cancelled"
    reason: str = Field(description="Why.")
    trace_id: fields.TraceId = None


AnyEvent = Annotated[
    ChatRequested
    | RequestRouted
    | WorkerTask
    | WorkerResult
    | EvaluationRequested
    | VerdictIssued
    | StreamChunk
    | Progress
    | RequestCompleted
    | RequestFailed
    | ClarificationRequested
    | ClarificationAnswered
    | CancelRequested
    | RequestCancelled,
    Field(discriminator="kind"),
]

EVENT_ADAPTER: TypeAdapter[AnyEvent] = TypeAdapter(AnyEvent)

TerminalEvent = RequestCompleted | RequestFailed | RequestCancelled
# How a request ends, or parks waiting for the user: what its record keeps and clients are sent.
Outcome = RequestCompleted | RequestFailed | RequestCancelled | ClarificationRequested
OUTCOMES = (RequestCompleted, RequestFailed, RequestCancelled, ClarificationRequested)


def parse_event(data: bytes | str) -> AnyEvent:
    """Parse any event from its JSON; raises pydantic.ValidationError on bad input."""
    return EVENT_ADAPTER.validate_json(data)
