"""Frames between WebSocket clients and the gateway (the TypeScript seed's protocol, extended):
one discriminated union per direction, `ClientFrame` (in) and `ServerFrame` (out).

In:  {"auth": "<token>"}   (first frame, when the gateway requires tokens and no header was sent)
     {"init": true, "uuid": "...", "events": false, "if_busy"?}
     {"uuid": "..."}     (any frame with a uuid sets the socket's session, as the seed's server)
     {"uuid"?: "...", "message": "..." | [{"role", "content"}, ...], "success_criteria"?,
      "request_id"?, "use_evaluator"?, "skip_cache"?, "reply_to"?, "if_busy"?}
     {"cancel": "<request_id>"}
Out: {"on_chat_model_stream": "<chunk>"} ... {"on_chat_model_end": true}
     {"error": {"code": "...", "message": "..."}}
     {"authenticated": true, "principal": "..."}
     {"event": "ready" | "ack" | "queued" | "progress" | "clarification" | "replay", ...}

The seed's frames have no common tag field, so each union tells its members apart by which key
a frame has (`frame_kind`). Clients that say `"events": true` at init also get {"event": ...}
frames and a `request_id`, `status` and `metadata` on stream and end frames; other clients
never see keys they do not know. A frame is sent as `frame.wire()`: the fields it was built
with, nothing else.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StrictBool,
    StrictStr,
    Tag,
    TypeAdapter,
)

from contracts import fields
from contracts.approvals import Approval
from contracts.base import (
    FailureCode,
    IfBusy,
    Model,
    Source,
    Usage,
)

ID_PATTERN = r"^[A-Za-z0-9_.:\-]{1,128}$"
# Request ids become NATS subject tokens and KV keys, so they may hold neither "." nor ":".
REQUEST_ID_PATTERN = r"^[A-Za-z0-9_\-]{1,128}$"

ErrorCode = Literal[
    "invalid_json",
    "invalid_frame",
    "frame_too_large",
    "not_initialised",
    "unavailable",
    "request_failed",
    "rate_limited",
    "unauthorized",
    "not_found",
    "conflict",
    "message_too_long",
    "invalid_body",
    "busy",
    "forbidden",
]


# --- in: client -> gateway -----------------------------------------------------------------


class InFrame(BaseModel):
    """Lenient about unknown keys (old clients send extras), strict about types."""

    model_config = ConfigDict(frozen=True, extra="ignore")


class AuthFrame(InFrame):
    auth: StrictStr = Field(min_length=1, max_length=4096, description="A bearer token.")


BUSY_DESCRIPTION = (
    "What this message does while the session answers another request: 'enqueue' (wait its "
    "turn; the default), 'reject' (refused with a 'busy' error) or 'interrupt' (cancel the "
    "running request and those waiting, then go next)."
)


class InitFrame(InFrame):
    init: Literal[True] = Field(description="Marks an init frame.")
    uuid: StrictStr | None = Field(
        default=None, pattern=ID_PATTERN, description="The client's session id."
    )
    events: StrictBool = Field(default=False, description="Send typed progress frames too.")
    if_busy: IfBusy | None = Field(
        default=None, description=f"This socket's default. {BUSY_DESCRIPTION}"
    )


class SessionFrame(InFrame):
    uuid: StrictStr = Field(pattern=ID_PATTERN, description="The client's session id.")


class ChatMessage(InFrame):
    role: StrictStr = Field(description="'user', 'assistant' or 'system'.")
    content: StrictStr = Field(description="The message text.")


class MessageFrame(InFrame):
    uuid: StrictStr | None = Field(
        default=None,
        pattern=ID_PATTERN,
        description="The client's session id (default: the socket's, set by an earlier frame).",
    )
    message: Annotated[StrictStr, Field(min_length=1)] | list[ChatMessage] = Field(
        description="The user's message, or a conversation whose last user message is it."
    )
    if_busy: IfBusy | None = Field(default=None, description=BUSY_DESCRIPTION)
    success_criteria: StrictStr | None = Field(default=None, description="Success criteria.")
    request_id: StrictStr | None = Field(
        default=None,
        pattern=REQUEST_ID_PATTERN,
        description="Client-chosen id for idempotent retries.",
    )
    use_evaluator: StrictBool = Field(default=True, description="Judge outputs before answering.")
    skip_cache: StrictBool = Field(default=False, description="Bypass the semantic cache.")
    reply_to: StrictStr | None = Field(
        default=None,
        pattern=REQUEST_ID_PATTERN,
        description="A parked request this message answers.",
    )
    approval_id: StrictStr | None = Field(
        default=None,
        description="With reply_to: the approval this message ('yes' or 'no') decides; a stale "
        "one is refused.",
    )


class CancelFrame(InFrame):
    cancel: StrictStr = Field(pattern=REQUEST_ID_PATTERN, description="The request to cancel.")


InKind = Literal["auth", "init", "message", "cancel", "session"]


def in_kind(data: Any) -> InKind | None:
    """Which client frame this is, by its keys (the seed's frames carry no tag)."""
    if not isinstance(data, dict):
        return None
    if "auth" in data:
        return "auth"
    if data.get("init") is True:
        return "init"
    if "message" in data:
        return "message"
    if "cancel" in data:
        return "cancel"
    if "uuid" in data:
        return "session"
    return None


ClientFrame = Annotated[
    Annotated[AuthFrame, Tag("auth")]
    | Annotated[InitFrame, Tag("init")]
    | Annotated[MessageFrame, Tag("message")]
    | Annotated[CancelFrame, Tag("cancel")]
    | Annotated[SessionFrame, Tag("session")],
    Discriminator(
        in_kind,
        custom_error_type="unknown_frame",
        custom_error_message='expected {"init": true, "uuid": ...}, {"uuid": ..., "message": ...}'
        ' or {"cancel": "<request_id>"}',
    ),
]
CLIENT_FRAME: TypeAdapter[ClientFrame] = TypeAdapter(ClientFrame)


# --- out: gateway -> client ----------------------------------------------------------------


class OutFrame(Model):
    """A frame to a client; `wire()` is what is sent (only the fields it was built with)."""

    def wire(self) -> str:
        return self.model_dump_json(exclude_unset=True)


class StreamFrame(OutFrame):
    on_chat_model_stream: str = Field(description="A piece of the answer.")
    request_id: str | None = Field(default=None, description="Events mode: whose piece.")


class CompletedMetadata(Model):
    request_id: fields.RequestId
    status: Literal["completed", "partial"] = Field(description="How it ended.")
    route: Literal["direct", "orchestrated", "cached"] = Field(description="How it was answered.")
    worker_type: fields.WorkerKind
    attempts: int = Field(description="Attempts made.")
    score: fields.LastScore
    feedback: fields.LastFeedback
    sources: list[Source] = Field(description="Sources of the answer.")
    usage: Usage = Field(description="Total model usage.")
    cost_usd: float | None = Field(
        default=None, description="The usage priced by the price table (USD)."
    )
    usage_estimated: fields.UsageEstimated = False
    trace_id: fields.TraceId


class FailedMetadata(Model):
    code: fields.FailureReason
    error: str = Field(description="What went wrong.")
    trace_id: fields.TraceId


class CancelledMetadata(Model):
    reason: str = Field(description="Why it was cancelled.")
    trace_id: fields.TraceId


class ClarificationMetadata(Model):
    source: Literal["evaluator", "planner"] = Field(description="Who asked.")
    attempt: int | None = Field(description="The attempt that needed input.")
    questions: fields.AskedQuestions
    trace_id: fields.TraceId
    approval: Approval | None = Field(
        default=None, description="The action awaiting approval, when it is one."
    )


class RejectedMetadata(Model):
    code: ErrorCode = Field(description="Why the message was not taken.")


EndStatus = Literal["completed", "partial", "failed", "cancelled", "awaiting_clarification"]


class EndFrame(OutFrame):
    on_chat_model_end: Literal[True] = Field(description="The end of one request's turn.")
    request_id: str | None = Field(default=None, description="Events mode: which request.")
    status: EndStatus | Literal["rejected"] | None = Field(
        default=None, description="Events mode: how it ended."
    )
    metadata: (
        CompletedMetadata
        | FailedMetadata
        | CancelledMetadata
        | ClarificationMetadata
        | RejectedMetadata
        | None
    ) = Field(default=None, description="Events mode: details of the end.")


class ErrorBody(Model):
    code: ErrorCode | FailureCode = Field(description="Machine-readable reason.")
    message: str = Field(description="What went wrong, in words a user can act on.")
    request_id: str | None = Field(default=None, description="Events mode: which request.")


class ErrorFrame(OutFrame):
    error: ErrorBody = Field(description="The error.")


class AuthenticatedFrame(OutFrame):
    authenticated: Literal[True] = Field(description="The token was accepted.")
    principal: str = Field(description="Who the token belongs to.")


class ReadyEvent(OutFrame):
    event: Literal["ready"] = Field(description="Init done (events mode).")
    uuid: str = Field(description="The session.")


class AckEvent(OutFrame):
    event: Literal["ack"] = Field(description="A frame was taken.")
    request_id: str = Field(description="The request it concerns.")
    action: Literal["message", "answer", "cancel"] = Field(description="What was taken.")


class QueuedEvent(OutFrame):
    event: Literal["queued"] = Field(description="The request waits its turn in its session.")
    request_id: str = Field(description="The queued request.")
    behind: str = Field(description="The session's request being answered now.")
    position: int = Field(description="Its place in the queue, from 1.")


class ProgressEvent(OutFrame):
    event: Literal["progress"] = Field(description="A step of the request's way.")
    event_id: str = Field(description="The bus event's id.")
    request_id: fields.RequestId
    session_id: str = Field(description="Its scoped session.")
    ts: AwareDatetime = Field(description="When it happened.")
    stage: fields.Stage
    detail: fields.StepDetail
    attempt: fields.StepAttempt
    worker_type: fields.WorkerKind
    passed: fields.StepPassed
    score: fields.StepScore
    feedback: fields.StepFeedback
    suggestions: fields.StepSuggestions
    workflow_status: fields.StepStatus = None
    tool: fields.StepTool = None


class ClarificationEvent(OutFrame):
    event: Literal["clarification"] = Field(description="The request waits for answers.")
    request_id: str = Field(description="The parked request.")
    questions: fields.AskedQuestions
    approval: Approval | None = Field(
        default=None,
        description="The action awaiting approval (its arguments exactly as they will run); "
        'answer with {"message": "yes"} or "no", naming the request in reply_to.',
    )


class ReplayEvent(OutFrame):
    event: Literal["replay"] = Field(description="The whole of a missed result follows.")
    request_id: str = Field(description="Its request.")


EventFrame = Annotated[
    ReadyEvent | AckEvent | QueuedEvent | ProgressEvent | ClarificationEvent | ReplayEvent,
    Field(discriminator="event"),
]

OutKind = Literal["stream", "end", "error", "authenticated", "event"]


def out_kind(data: Any) -> OutKind | None:
    """Which server frame this is, by its keys."""
    keys = data if isinstance(data, dict) else vars(data) if isinstance(data, OutFrame) else {}
    for key, kind in (
        ("on_chat_model_stream", "stream"),
        ("on_chat_model_end", "end"),
        ("error", "error"),
        ("authenticated", "authenticated"),
        ("event", "event"),
    ):
        if key in keys:
            return kind  # type: ignore[return-value]
    return None


ServerFrame = Annotated[
    Annotated[StreamFrame, Tag("stream")]
    | Annotated[EndFrame, Tag("end")]
    | Annotated[ErrorFrame, Tag("error")]
    | Annotated[AuthenticatedFrame, Tag("authenticated")]
    | Annotated[EventFrame, Tag("event")],
    Discriminator(out_kind),
]
SERVER_FRAME: TypeAdapter[ServerFrame] = TypeAdapter(ServerFrame)
