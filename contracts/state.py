"""Records kept in JetStream KV that more than one service reads: a session's record and a
request's record (its place in its life, the read model behind the workflows API, how it
ended, and, once the orchestrator has it, its attempt loop's state: one record, moved by one
write per step). The rules for moving a request from one state to the next live in
`services/runtime/requests/lifecycle.py`, the attempt loop's in
`services/orchestrator/loop.py`; this module only says what the records hold."""

from __future__ import annotations

import secrets
from typing import Annotated, Literal, get_args

from pydantic import AwareDatetime, Field

from contracts import fields
from contracts.approvals import Approval
from contracts.base import Model, Turn, Usage, WorkflowStatus, utcnow
from contracts.base import SessionRecord as SessionRecord  # kept here, where it was
from contracts.decisions import OrchestratorDecision, Question, Verdict, WorkerType
from contracts.events import Outcome, RequestFailed, RequestRouted, WorkerResult
from contracts.frontend import ContextItem, FrontendTool, LoopMessage, ToolCall
from contracts.replay import Replay

TerminalState = Literal["completed", "partial", "failed", "cancelled"]
"""How a request's life ends (and the orchestrator's attempt loop with it)."""

RequestState = Literal[
    "queued",
    "accepted",
    "direct",
    "routed",
    "decided",
    "working",
    "evaluating",
    "awaiting_clarification",
    "awaiting_approval",
    TerminalState,
]
"""Where a request is in its life (see `services/runtime/requests/lifecycle.py` for the moves)."""

TERMINAL_STATES: frozenset[str] = frozenset(get_args(TerminalState))

LoopStatus = Literal[
    "deciding",
    "working",
    "evaluating",
    "awaiting_clarification",
    "awaiting_approval",
    TerminalState,
]
"""Where the orchestrator's attempt loop is."""


class Attempt(Model):
    """One attempt of the attempt loop."""

    n: int = Field(ge=1, description="Attempt number.")
    result: WorkerResult | None = Field(default=None, description="The worker's result.")
    verdict: Verdict | None = Field(default=None, description="The evaluator's verdict.")
    verdict_error: str | None = Field(default=None, description="Why no verdict could be had.")
    span_id: str | None = Field(default=None, description="Trace span id of the attempt (hex).")
    started_ns: int | None = Field(default=None, description="When it was dispatched (ns).")
    approval_id: str | None = Field(
        default=None, description="The decided approval this attempt's worker acts on."
    )
    verdict_at: AwareDatetime | None = Field(
        default=None, description="When the verdict (or why there is none) arrived."
    )
    verdict_usage: Usage | None = Field(
        default=None, description="The evaluation's model usage (for the timeline)."
    )
    recorded_from: str | None = Field(
        default=None,
        description="A replay's attempt taken as recorded from this request, not run again.",
    )


class LoopState(Model):
    """Everything the orchestrator's attempt loop knows about one request, kept in the
    request's record (`RequestRecord.loop`), so that one write moves both."""

    request: RequestRouted = Field(description="The routed request.")
    max_attempts: int = Field(ge=1, description="Attempt budget.")
    status: LoopStatus = Field(default="deciding", description="Where the loop is.")
    decision: OrchestratorDecision | None = Field(default=None, description="The decision.")
    attempts: list[Attempt] = Field(default_factory=list, description="Attempts so far.")
    failure: RequestFailed | None = Field(default=None, description="Set when it failed.")
    usage: Usage = Field(default_factory=Usage, description="Model usage so far.")
    questions: list[Question] = Field(default_factory=list, description="Open questions.")
    clarifications: list[str] = Field(
        default_factory=list, description="Answered questions ('Q: ... A: ...')."
    )
    answers: list[str] = Field(
        default_factory=list,
        description="The user's own words in those answers, without the questions.",
    )
    rounds: int = Field(default=0, ge=0, description="Clarification rounds so far.")
    approval: Approval | None = Field(default=None, description="The approval waited for.")
    approvals: list[Approval] = Field(
        default_factory=list, description="Approvals decided so far, with their decisions."
    )
    waiting_tools: list[ToolCall] = Field(
        default_factory=list,
        description="The client's tool calls it is parked on (AG-UI frontend tools).",
    )
    transcript: list[LoopMessage] = Field(
        default_factory=list,
        description="The TOOLS conversation carried to the next attempt: up to the client's "
        "tool calls, and their results once they came.",
    )
    tool_rounds: int = Field(default=0, ge=0, description="Client tool rounds so far.")
    cancel_reason: str | None = Field(default=None, description="Why it was cancelled.")
    budget_note: str | None = Field(
        default=None, description="Set when a budget stopped it: which limit, and the spend."
    )
    trace_id: str | None = Field(default=None, description="Trace id of the request (hex).")
    span_id: str | None = Field(default=None, description="Span the attempts hang under (hex).")
    decided_at: AwareDatetime | None = Field(
        default=None, description="When the decision was made (or taken as recorded)."
    )
    decision_usage: Usage | None = Field(
        default=None, description="The decision's model usage (for the timeline)."
    )
    secret: str = Field(
        default_factory=lambda: secrets.token_hex(16),
        exclude=True,
        description="Never stored nor sent: the root of this request's dispatch tokens and "
        "dedupe keys; the orchestrator derives it from its own login secret each time it reads "
        "the record (services/orchestrator/store.py, authentic.py).",
    )

    @property
    def current(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None


class RequestRecord(Model):
    """One request (key: request id) in the `status` bucket: created by the gateway when it
    accepts the request, moved only by the compare-and-set of
    `services/runtime/requests/lifecycle.py`."""

    request_id: fields.RequestId
    session_id: str = Field(description="Its scoped session.")
    principal: str = Field(default="anonymous", description="Who owns it.")
    text: str = Field(description="The user's message.")
    success_criteria: str | None = Field(default=None, description="The user's criteria.")
    use_evaluator: bool = Field(default=True, description="Judge outputs before answering.")
    skip_cache: bool = Field(default=False, description="Bypass the semantic cache.")
    planned: bool = Field(
        default=False, description="A workflow: planned by the research pipeline, never direct."
    )
    preferences: dict[str, str] = Field(
        default_factory=dict, description="The principal's preferences given to the planner."
    )
    history: list[Turn] = Field(
        default_factory=list, description="Earlier turns the client sent with the request."
    )
    frontend_tools: list[FrontendTool] = Field(
        default_factory=list, description="Tools the client runs itself (AG-UI)."
    )
    context: list[ContextItem] = Field(
        default_factory=list, description="Context the client app sent (AG-UI)."
    )
    hidden: bool = Field(
        default=False, description="Deleted by its owner: no longer listed nor found by the API."
    )
    push: bool = Field(
        default=False,
        description="A client asked to be notified of it (A2A push notifications): its steps, "
        "questions and end are published on its push subjects too (set by the gateway, by "
        "compare-and-set, when the first webhook config of the task is kept).",
    )
    seal: str = Field(
        default="",
        description="A random secret of the request, set by the gateway that accepts it and "
        "known only to the roles that read its record: its end's dedupe keys carry it, so no "
        "other role can store a message first under them (empty: made before it existed).",
    )
    state: RequestState = Field(default="accepted", description="Where it is in its life.")
    status: WorkflowStatus = Field(description="The status word clients see.")
    detail: str = Field(default="", description="Human-readable detail of the status.")
    worker_type: WorkerType | None = Field(default=None, description="Chosen worker kind.")
    attempt: int = Field(default=0, ge=0, description="Current attempt.")
    clarification_questions: list[Question] = Field(
        default_factory=list, description="Open questions, when awaiting clarification."
    )
    approvals: list[Approval] = Field(
        default_factory=list,
        description="Actions a person decided on, with each decision (who, when, digest).",
    )
    final_output: fields.FinalAnswer = None
    error: fields.WhyFailed = None
    cached: bool = Field(default=False, description="Answered from the semantic cache.")
    trace_id: fields.TraceId = None
    outcome: Annotated[Outcome, Field(discriminator="kind")] | None = Field(
        default=None,
        description="The event that ended it, or the open clarification; the first end wins.",
    )
    created_at: AwareDatetime = Field(default_factory=utcnow, description="Accepted at.")
    updated_at: AwareDatetime = Field(default_factory=utcnow, description="Last change.")
    completed_at: AwareDatetime | None = Field(default=None, description="Ended at.")
    loop: LoopState | None = Field(
        default=None,
        description="The orchestrator's attempt loop, once it has the request (written with "
        "each of its moves).",
    )
    replay: Replay | None = Field(
        default=None, description="Set when the request replays a recorded one."
    )

    @property
    def ended(self) -> bool:
        return self.state in TERMINAL_STATES
