"""How a request's stream, end and questions look to a WebSocket client: Sidekick's event frames
for a client that asked for events, and for the seeds' clients (the legacy protocol) only text
and end frames: any other key they would show as raw JSON."""

from __future__ import annotations

from typing import Protocol

from contracts import (
    ClarificationRequested,
    Outcome,
    RequestCancelled,
    RequestCompleted,
    RequestFailed,
)
from contracts.frames import (
    ClarificationEvent,
    EndFrame,
    ErrorBody,
    ErrorFrame,
    OutFrame,
    StreamFrame,
)
from services.gateway.core.outcomes import end_metadata, end_status, questions_text

# What the TypeScript seed's server streamed first for a request it routed.
ROUTED_TEXT = "Processing your request..."


class Client(Protocol):
    """What a frame's shape depends on: whether the client reads events (else it speaks the
    legacy protocol), and the requests it was told were routed (ROUTED_TEXT went first)."""

    events: bool
    prefaced: set[str]


def stream_frame(conn: Client, text: str, request_id: str) -> StreamFrame:
    if conn.events:
        return StreamFrame(on_chat_model_stream=text, request_id=request_id)
    return StreamFrame(on_chat_model_stream=text)


def outcome_frames(conn: Client, event: Outcome, already: str = "") -> list[OutFrame]:
    """What a client sees when a request ends or parks. `already` is the text streamed live."""
    frames: list[OutFrame] = []

    def text(chunk: str) -> None:
        frames.append(stream_frame(conn, chunk, event.request_id))

    if not conn.events and event.request_id in conn.prefaced:
        conn.prefaced.discard(event.request_id)
        if not isinstance(event, RequestCancelled):
            text("\n\n")  # after ROUTED_TEXT, as the seed's server did
    if isinstance(event, RequestCompleted):
        rest = event.output[len(already) :] if event.output.startswith(already) else event.output
        if rest:
            text(rest)
    elif isinstance(event, RequestFailed):
        if conn.events:
            body = ErrorBody(code=event.code, message=event.error, request_id=event.request_id)
            frames.append(ErrorFrame(error=body))
        else:  # an old client knows only text and ends (it shows any other key as JSON)
            text(f"Sorry, I could not do that: {event.error}")
    elif isinstance(event, ClarificationRequested):
        if conn.events:
            frames.append(
                ClarificationEvent(
                    event="clarification",
                    request_id=event.request_id,
                    questions=event.questions,
                    # Only an approval carries the key, so a plain question's frame is as before.
                    **({"approval": event.approval} if event.approval is not None else {}),
                )
            )
        else:
            text(questions_text(event))
    frames.append(end_frame(conn, event))
    return frames


def end_frame(conn: Client, done: Outcome) -> EndFrame:
    if not conn.events:
        return EndFrame(on_chat_model_end=True)
    return EndFrame(
        on_chat_model_end=True,
        request_id=done.request_id,
        status=end_status(done),
        metadata=end_metadata(done),
    )
