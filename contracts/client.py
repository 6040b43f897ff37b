"""Frames between WebSocket clients and the gateway (the TypeScript seed's protocol, extended).

In:  {"init": true, "uuid": "...", "events": false}
     {"uuid": "...", "message": "...", "success_criteria"?, "request_id"?, "use_evaluator"?,
      "skip_cache"?, "reply_to"?}
     {"cancel": "<request_id>"}
     {"auth": "<token>"}   (first frame, when the gateway requires tokens and no header was sent)
Out: {"on_chat_model_stream": "<chunk>"} ... {"on_chat_model_end": true}
     {"error": {"code": "...", "message": "..."}}
Clients that say `"events": true` at init also get {"event": ...} frames and a `request_id` on
stream and end frames; other clients never see keys they do not know.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr

ID_PATTERN = r"^[A-Za-z0-9_.:\-]{1,128}$"
# Request ids become NATS subject tokens and KV keys, so they may hold neither "." nor ":".
REQUEST_ID_PATTERN = r"^[A-Za-z0-9_\-]{1,128}$"


class ClientFrame(BaseModel):
    """Lenient about unknown keys (old clients send extras), strict about types."""

    model_config = ConfigDict(frozen=True, extra="ignore")


class InitFrame(ClientFrame):
    init: Literal[True] = Field(description="Marks an init frame.")
    uuid: StrictStr = Field(pattern=ID_PATTERN, description="The client's session id.")
    events: StrictBool = Field(default=False, description="Send typed progress frames too.")


class MessageFrame(ClientFrame):
    uuid: StrictStr = Field(pattern=ID_PATTERN, description="The client's session id.")
    message: StrictStr = Field(min_length=1, description="The user's message.")
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


class AuthFrame(ClientFrame):
    auth: StrictStr = Field(min_length=1, max_length=4096, description="A bearer token.")


class CancelFrame(ClientFrame):
    cancel: StrictStr = Field(pattern=REQUEST_ID_PATTERN, description="The request to cancel.")


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
]
