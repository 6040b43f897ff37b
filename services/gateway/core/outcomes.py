"""How a request's progress, questions and end read on any surface: the questions as text (the
legacy WebSocket, `/v1`, the workflows chat, A2A and AG-UI all show the same words), a progress
event as its frame, and the status and details of an end for the clients that want them."""

from __future__ import annotations

from typing import cast

from contracts import (
    ClarificationRequested,
    Outcome,
    Progress,
    RequestCancelled,
    RequestCompleted,
    RequestFailed,
)
from contracts.frames import (
    CancelledMetadata,
    ClarificationMetadata,
    CompletedMetadata,
    EndStatus,
    FailedMetadata,
    ProgressEvent,
)
from services.runtime.requests.lifecycle import STATUS, state_of

EndMetadata = CompletedMetadata | FailedMetadata | CancelledMetadata | ClarificationMetadata


def questions_text(event: ClarificationRequested) -> str:
    if event.approval is not None:  # one question, whole: the action exactly as it would run
        return "\n".join(q.question for q in event.questions)
    lines = ["I need a little more information before I go on:"]
    lines += [f"{n}. {q.question}" for n, q in enumerate(event.questions, 1)]
    lines.append("Reply with your answers and I will continue.")
    return "\n".join(lines)


def progress_frame(p: Progress) -> ProgressEvent:
    return ProgressEvent.model_validate({"event": "progress", **p.model_dump(exclude={"kind"})})


def end_status(done: Outcome) -> EndStatus:
    """How a request ended, or that it waits for an answer, as its end says it on any surface:
    the status word of the state the outcome puts it in (an end, or a park)."""
    return cast(EndStatus, STATUS[state_of(done)])


def end_metadata(done: Outcome) -> EndMetadata:
    """The details of how a request ended (or what it asks), for clients that want them."""
    if isinstance(done, RequestCompleted):
        meta = done.model_dump(exclude={"kind", "output", "event_id", "ts", "session_id"})
        return CompletedMetadata.model_validate(meta)
    if isinstance(done, RequestFailed):
        return FailedMetadata(code=done.code, error=done.error, trace_id=done.trace_id)
    if isinstance(done, RequestCancelled):
        return CancelledMetadata(reason=done.reason, trace_id=done.trace_id)
    return ClarificationMetadata(
        source=done.source,
        attempt=done.attempt,
        questions=done.questions,
        trace_id=None,
        **({"approval": done.approval} if done.approval is not None else {}),
    )
