"""A request's story as one ordered list (`GET /api/requests/{id}/timeline`, `sidekick inspect`):
what the frontline decided, what the orchestrator asked which worker, what each attempt did and
cost, what the evaluator said, what was asked and approved, how it ended. Built from the
request's record alone (services/gateway/requests/timeline.py); a part no longer kept is an
explicit `unavailable` entry, never a gap. Replays (`POST /api/requests/{id}/replay`) are here
too: they are new requests that take a recorded one's inputs up to a step."""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, Field, StrictStr

from contracts import fields
from contracts.approvals import Approval
from contracts.base import Model, Source, ToolUse, Usage
from contracts.decisions import Parameter, WorkerType
from contracts.http import Body, HttpBody
from contracts.replay import REPLAY_STEP_PATTERN, Replay

Step = Literal[
    "accepted",
    "routed",
    "direct",
    "cached",
    "decided",
    "attempt",
    "verdict",
    "clarification",
    "approval",
    "budget",
    "cancelled",
    "ended",
    "unavailable",
]


class TimelineEntry(Model):
    """One step of a request's story; the fields a step has are set, the others empty."""

    step: Step = Field(description="Which kind of step.")
    at: AwareDatetime | None = Field(default=None, description="When it happened (None: unknown).")
    duration_ms: int | None = Field(
        default=None, ge=0, description="How long it took, where known (ms)."
    )
    title: str = Field(description="One line saying what happened.")
    detail: str = Field(default="", description="More words: a reason, a note, an error.")
    attempt: int | None = Field(default=None, description="The attempt it belongs to.")
    worker_type: WorkerType | None = Field(default=None, description="The worker kind.")
    task: str | None = Field(default=None, description="The task as sent to the worker.")
    parameters: list[Parameter] = Field(
        default_factory=list, description="The decision's parameters."
    )
    success_criteria: str | None = Field(default=None, description="What success is judged by.")
    feedback_in: str | None = Field(
        default=None, description="The previous verdict's feedback carried into this attempt."
    )
    suggestions_in: list[str] = Field(
        default_factory=list, description="The previous verdict's suggestions carried into it."
    )
    output: str | None = Field(default=None, description="What the worker (or answer) said.")
    error: str | None = Field(default=None, description="Why it failed, when it did.")
    sources: list[Source] = Field(default_factory=list, description="Sources used.")
    tool_calls: list[ToolUse] = Field(default_factory=list, description="Tool calls, in order.")
    passed: bool | None = Field(default=None, description="The verdict.")
    score: int | None = Field(default=None, description="The verdict's score.")
    feedback: str | None = Field(default=None, description="The verdict's feedback.")
    suggestions: list[str] = Field(default_factory=list, description="The verdict's suggestions.")
    approval: Approval | None = Field(default=None, description="An approval and its decision.")
    usage: Usage | None = Field(default=None, description="Model usage of this step.")
    cost_usd: float | None = Field(default=None, description="That usage priced (USD).")
    recorded_from: str | None = Field(
        default=None, description="Taken as recorded from this request (a replay's input)."
    )


class Timeline(HttpBody):
    """A request's timeline, oldest step first."""

    request_id: fields.RequestId
    session: str = Field(description="Its session (the client's uuid).")
    principal: str = Field(description="Who owns it.")
    message: str = Field(description="What the user wrote.")
    success_criteria: str | None = Field(default=None, description="The user's own criteria.")
    state: fields.LifeState
    status: fields.StatusWord
    route: Literal["direct", "orchestrated", "cached"] | None = Field(
        default=None, description="How it was answered, once known."
    )
    final_output: fields.FinalAnswer = None
    usage: Usage = Field(default_factory=Usage, description="The whole request's model usage.")
    cost_usd: float | None = Field(default=None, description="That usage priced (USD).")
    replay: Replay | None = Field(default=None, description="Set when it replays another.")
    trace_id: fields.TraceId = None
    entries: list[TimelineEntry] = Field(description="The steps, in order.")


class ReplayAsk(Body):
    """`POST /api/requests/{id}/replay`: replay a recorded request from a step."""

    from_step: StrictStr = Field(
        default="decision",
        pattern=REPLAY_STEP_PATTERN,
        alias="from",
        description="'decision', 'attempt:N' or 'evaluation:N' (default decision).",
    )
    model: StrictStr | None = Field(
        default=None, max_length=200, description="The worker's model for the live part."
    )
    role_models: dict[StrictStr, StrictStr] = Field(
        default_factory=dict,
        description="A model per role for the live part: orchestrator, worker, evaluator.",
    )
    session: StrictStr | None = Field(
        default=None,
        max_length=128,
        description="The session (uuid) to run it in; default the original's.",
    )


class ReplayStarted(HttpBody):
    """A replay accepted: its own request, followed like any other."""

    request_id: str = Field(description="The replay's new request id.")
    replay_of: str = Field(description="The recorded request it replays.")
    session: str = Field(description="The session it runs in (the client's uuid).")
    from_step: str = Field(description="Where its live part starts.")


class RequestSummary(Model):
    """One of the caller's requests, as a list shows it."""

    request_id: fields.RequestId
    state: fields.LifeState
    status: fields.StatusWord
    message: str = Field(description="What the user wrote (cut at 200 characters).")
    created_at: AwareDatetime = Field(description="When it was accepted.")
    error: fields.WhyFailed = None


class RequestList(HttpBody):
    """`GET /api/requests?failed_since=SECONDS`: the caller's requests that ended failed or
    partial in that window, newest first."""

    requests: list[RequestSummary] = Field(description="The requests, newest first.")
