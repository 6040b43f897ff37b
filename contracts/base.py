"""Shared building blocks of the wire format: the event base class and small value types."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field


def new_id() -> str:
    """A fresh random identifier (hex, 32 chars)."""
    return uuid.uuid4().hex


def utcnow() -> datetime:
    return datetime.now(UTC)


class Model(BaseModel):
    """Base of every wire type: immutable, and unknown fields are an error, not a surprise."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Event(Model):
    """Fields every event on the bus carries."""

    event_id: str = Field(default_factory=new_id, description="Unique id of this event.")
    request_id: str = Field(description="The user request this event belongs to.")
    session_id: str = Field(
        description="The conversation, scoped by the gateway under the client's principal."
    )
    ts: AwareDatetime = Field(default_factory=utcnow, description="When the event was created.")


class ModelUsage(Model):
    """Token usage of the calls one model answered."""

    input_tokens: int = Field(default=0, ge=0, description="Prompt tokens.")
    output_tokens: int = Field(default=0, ge=0, description="Completion tokens.")
    calls: int = Field(default=0, ge=0, description="Number of model calls counted.")

    def __add__(self, other: ModelUsage) -> ModelUsage:
        return ModelUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            calls=self.calls + other.calls,
        )


class Usage(Model):
    """Token usage of one or more model calls."""

    input_tokens: int = Field(default=0, ge=0, description="Prompt tokens.")
    output_tokens: int = Field(default=0, ge=0, description="Completion tokens.")
    calls: int = Field(default=0, ge=0, description="Number of model calls counted.")
    models: dict[str, ModelUsage] = Field(
        default_factory=dict,
        description="The same, per model that answered, in order of first use: which models "
        "did the work (a role's fallback model appears when it answered) and what each costs. "
        "Empty from senders that predate it.",
    )
    counted_calls: int = Field(
        default=0,
        ge=0,
        description="Of `calls`, those whose server reported no usage: their tokens were counted "
        "by Sidekick (an estimate, about four characters a token), not reported.",
    )
    tool_calls: int = Field(default=0, ge=0, description="Tool calls made (TOOLS worker).")

    @classmethod
    def of_call(cls, model: str, input_tokens: int = 0, output_tokens: int = 0) -> Usage:
        """One call `model` answered."""
        one = ModelUsage(input_tokens=input_tokens, output_tokens=output_tokens, calls=1)
        return cls(
            input_tokens=input_tokens, output_tokens=output_tokens, calls=1, models={model: one}
        )

    def __add__(self, other: Usage) -> Usage:
        models = dict(self.models)
        for name, used in other.models.items():
            models[name] = models[name] + used if name in models else used
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            calls=self.calls + other.calls,
            models=models,
            counted_calls=self.counted_calls + other.counted_calls,
            tool_calls=self.tool_calls + other.tool_calls,
        )


class Turn(Model):
    """One message of a conversation."""

    role: str = Field(description="'user' or 'assistant'.", pattern="^(user|assistant)$")
    content: str = Field(description="The message text.")
    request_id: str | None = Field(default=None, description="Request that produced this turn.")


class Source(Model):
    """A web source a worker used."""

    title: str = Field(description="Title of the page.")
    url: str = Field(description="Address of the page.")
    snippet: str = Field(default="", description="Short excerpt.")
    age: str | None = Field(default=None, description="How old the page is, as the API says.")


WorkflowStatus = Literal[
    "started",
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
"""The workflow seed's status words, shown to clients (a projection of the state): `started`
once accepted, `queued` while it waits behind another request of its session."""

IfBusy = Literal["enqueue", "reject", "interrupt"]
"""What a message sent while its session answers another request does: wait its turn, be
refused, or cancel what runs (and what waits) and go next."""

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
    active: str | None = Field(
        default=None,
        description="The session's request being answered now (or waiting for its answers); "
        "the session's other requests wait in `queued` until it ends.",
    )
    active_since: AwareDatetime | None = Field(
        default=None, description="When `active` took the session."
    )
    queued: list[str] = Field(
        default_factory=list, description="Requests waiting their turn, oldest first."
    )
    handoff: str | None = Field(
        default=None,
        description="The request whose end gave the session to `active` (so a re-run of that "
        "end starts `active` again, and nothing else does).",
    )
    parked_aside: bool = Field(
        default=False,
        description="A request that parks (waits for the user) steps out of the lane, so the "
        "session's next request runs meanwhile (A2A: several tasks per context).",
    )


class SessionStamp(Model):
    """A session's record as the gateway had just written it when it sent a request on, and
    its revision: the frontline takes the history from it and starts the session's write at
    the request's end from it instead of reading it (a write that finds the session moved since
    fails, reads and writes again)."""

    revision: int = Field(ge=1, description="The record's revision in the `sessions` bucket.")
    record: SessionRecord = Field(description="The session's record at that revision.")


class RecordStamp(Model):
    """Where a request's record stood when its `chat.requested` was sent: with the fields the
    message carries, the record itself, so the frontline starts its write from it instead of
    reading it (checked against `digest`: a record that does not match is read)."""

    revision: int = Field(ge=1, description="The record's revision in the `status` bucket.")
    created_at: AwareDatetime = Field(description="The record's `created_at`.")
    updated_at: AwareDatetime = Field(description="The record's `updated_at`.")
    trace_id: str | None = Field(default=None, description="The record's `trace_id`.")
    seal: str = Field(default="", description="The record's `seal`.")
    digest: str = Field(description="SHA-256 of the record's JSON (hex, 32 digits).")


# A model's call of a tool, as the TOOLS worker records it and as a client's tools get it.
CallId = Annotated[str, Field(description="The model's id of the call.")]
ToolName = Annotated[str, Field(description="The tool.")]


class ToolUse(Model):
    """One tool call the TOOLS worker made, after it ran (arguments and result cut short)."""

    call_id: CallId
    name: ToolName
    arguments: str = Field(description="Its arguments, as JSON text (at most 2,000 characters).")
    result: str = Field(description="What it returned (at most 2,000 characters).")
    ok: bool = Field(description="False when the tool reported an error.")
    attempt: int = Field(ge=1, description="The attempt that made the call.")


class DeadLetter(Model):
    """A message that could not be processed, kept in the dead-letter stream with its reason."""

    source: str = Field(description="The service that gave up on it.")
    reason: str = Field(description="Why: 'invalid: ...', 'exhausted: ...', 'max deliveries ...'.")
    headers: dict[str, str] = Field(description="The message's headers.")
    body: str | None = Field(default=None, description="The message's body, if it is text.")


class TaskBudget(Model):
    """What the request may still spend when this attempt starts (its limits less its usage so
    far); a worker that calls a model in a loop checks it before each call."""

    tokens: int = Field(ge=0, description="Model tokens (in + out) the attempt may still use.")
    calls: int = Field(ge=0, description="Model calls the attempt may still make.")
    tool_calls: int | None = Field(
        default=None, ge=0, description="Tool calls the attempt may still make (None: no limit)."
    )


ProgressStage = Literal[
    "accepted",
    "direct",
    "routed",
    "decided",
    "attempt_started",
    "attempt_finished",
    "evaluated",
    "retrying",
    "worker_step",
]


FailureCode = Literal[
    "llm_not_configured",
    "llm_unavailable",
    "llm_invalid_output",
    "refused",
    "worker_failed",
    "unknown_worker",
    "delivery_exhausted",
    "clarification_timeout",
    "budget_exhausted",
    "internal",
]
