"""A2A tasks are Sidekick requests: the task id is the request id, the context id the session's
uuid, the state the request's (STATES), the artifacts its answer and sources. What a request's
bus events look like as a task stream (`updates`)."""

from __future__ import annotations

from typing import Any, Literal

from contracts import (
    AnyEvent,
    ClarificationRequested,
    Progress,
    RequestCancelled,
    RequestCompleted,
    RequestFailed,
    RequestRecord,
    StreamChunk,
)
from contracts.a2a import (
    Artifact,
    Message,
    Part,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from contracts.state import RequestState
from services.gateway.core.intake import unscoped
from services.gateway.core.outcomes import questions_text

Role = Literal["ROLE_USER", "ROLE_AGENT"]

# The request's states as task states. A parked state (waiting for the user) is INPUT_REQUIRED:
# a new one (an approval, say) is one entry here and one in agui/translate.py's INTERRUPTS.
STATES: dict[RequestState, TaskState] = {
    "queued": "TASK_STATE_SUBMITTED",
    "accepted": "TASK_STATE_SUBMITTED",
    "direct": "TASK_STATE_WORKING",
    "routed": "TASK_STATE_WORKING",
    "decided": "TASK_STATE_WORKING",
    "working": "TASK_STATE_WORKING",
    "evaluating": "TASK_STATE_WORKING",
    "awaiting_clarification": "TASK_STATE_INPUT_REQUIRED",
    "awaiting_approval": "TASK_STATE_INPUT_REQUIRED",
    "completed": "TASK_STATE_COMPLETED",
    "partial": "TASK_STATE_COMPLETED",
    "failed": "TASK_STATE_FAILED",
    "cancelled": "TASK_STATE_CANCELED",
}
ANSWER = "answer"
SOURCES = "sources"
# The worker kinds in a client's words (a progress text never shows the internal kind's name).
DOING: dict[str, str] = {
    "SEARCH": "searching the web",
    "RESEARCH": "researching",
    "EMAIL": "drafting the email",
    "GENERAL": "working on the answer",
    "TOOLS": "using tools",
}
# A research worker's steps (their details are written for people: "searching: a; b").
STEPS = {"planning", "researching", "synthesizing", "validating"}
SHOWN = 300  # characters of the evaluator's feedback a progress text shows


def doing(worker: str | None) -> str:
    return DOING.get(worker or "", "working on it")


def progress_text(event: Progress) -> str:
    """What a step means to the client, without the prompts and kinds it was made from (the
    orchestrator's `decided` detail is the task it wrote for the worker, for instance)."""
    attempt = f" (attempt {event.attempt})" if event.attempt and event.attempt > 1 else ""
    if event.stage == "direct":
        return "Answering."
    if event.stage == "routed":
        return "Deciding how to handle this."
    if event.stage in ("decided", "attempt_started"):
        return f"{doing(event.worker_type).capitalize()}{attempt}."
    if event.stage == "attempt_finished":
        return f"Checking the answer{attempt}."
    if event.stage == "evaluated":
        if event.passed:
            return "The answer passed its check."
        feedback = (event.feedback or "").strip()[:SHOWN]
        return "The answer needs another try" + (f": {feedback}" if feedback else ".")
    if event.stage == "retrying":
        return "Trying again."
    if event.tool is not None:
        return f"Used the tool {event.tool.name}."
    if event.workflow_status in STEPS and event.detail:
        return event.detail[:SHOWN]
    return f"{doing(event.worker_type).capitalize()}."


def record_text(record: RequestRecord) -> str | None:
    """A working task's status message, from its record, in the same words."""
    if record.status in STEPS and record.detail:
        return record.detail[:SHOWN]
    if record.state == "direct":
        return "Answering."
    if record.state in ("routed", "decided"):
        return "Deciding how to handle this."
    if record.state == "evaluating":
        return "Checking the answer."
    if record.state == "working":
        return f"{doing(record.worker_type).capitalize()}."
    return None


def state_of(record: RequestRecord) -> TaskState:
    if isinstance(record.outcome, RequestFailed) and record.outcome.code == "refused":
        return "TASK_STATE_REJECTED"
    return STATES[record.state]


def says(ids: tuple[str, str], n: str, *parts: Part, role: Role = "ROLE_AGENT") -> Message:
    """Message `n` of the task (`ids`: the task's and its context's), by `role`."""
    task_id, context_id = ids
    return Message(
        message_id=f"{task_id}-{n}",
        context_id=context_id,
        task_id=task_id,
        role=role,
        parts=list(parts),
    )


def agent_says(ids: tuple[str, str], text: str, n: str) -> Message:
    return says(ids, n, Part(text=text))


def task_of(record: RequestRecord, history_length: int | None = None) -> Task:
    context = unscoped(record.principal, record.session_id)
    ids = (record.request_id, context)
    state = state_of(record)
    message: Message | None = None
    outcome = record.outcome
    if isinstance(outcome, ClarificationRequested) and state == "TASK_STATE_INPUT_REQUIRED":
        message = asked(ids, outcome)
    elif isinstance(outcome, RequestFailed):
        message = agent_says(ids, outcome.error, "error")
    elif isinstance(outcome, RequestCancelled):
        message = agent_says(ids, f"Cancelled: {outcome.reason}.", "cancelled")
    elif state == "TASK_STATE_WORKING" and (said := record_text(record)):
        message = agent_says(ids, said, "status")
    artifacts = artifacts_of(outcome) if isinstance(outcome, RequestCompleted) else None
    user = says(ids, "request", Part(text=record.text), role="ROLE_USER")
    history = [user] if history_length is None or history_length > 0 else []
    status = TaskStatus(state=state, message=message, timestamp=record.updated_at.isoformat())
    metadata: dict[str, str | int] = {"status": record.status, "attempt": record.attempt}
    if record.worker_type is not None:
        metadata["worker_type"] = record.worker_type
    return Task(
        id=record.request_id,
        context_id=context,
        status=status,
        artifacts=artifacts,
        history=history,
        metadata=metadata,
    )


def asked(ids: tuple[str, str], event: ClarificationRequested) -> Message:
    """The open questions as the status message: their text, and a data part by id."""
    data: dict[str, Any] = {"questions": [q.model_dump(mode="json") for q in event.questions]}
    if event.approval:  # an action waiting for approval: what it would do, exactly; yes or no
        data["approval"] = event.approval.model_dump(mode="json")
    answers = Part(data=data, media_type="application/json")
    return says(ids, event.event_id, Part(text=questions_text(event)), answers)


def artifacts_of(done: RequestCompleted) -> list[Artifact]:
    found = [Artifact(artifact_id=ANSWER, name="answer", parts=[Part(text=done.output)])]
    if done.sources:
        sources = [s.model_dump(mode="json") for s in done.sources]
        found.append(
            Artifact(
                artifact_id=SOURCES,
                name="sources",
                parts=[Part(data={"sources": sources}, media_type="application/json")],
            )
        )
    return found


class Updates:
    """A request's bus events as the stream's responses (after its first: the task)."""

    def __init__(self, task_id: str, context_id: str) -> None:
        self.ids = (task_id, context_id)
        self.of_task = {"task_id": task_id, "context_id": context_id}  # on each of its updates
        self.streamed = ""
        self.done = False

    def status(self, state: TaskState, message: Message | None, ts: str) -> StreamResponse:
        status = TaskStatus(state=state, message=message, timestamp=ts)
        return StreamResponse(status_update=TaskStatusUpdateEvent(**self.of_task, status=status))

    def artifact(self, artifact: Artifact, append: bool, last: bool) -> StreamResponse:
        event = TaskArtifactUpdateEvent(
            **self.of_task, artifact=artifact, append=append, last_chunk=last
        )
        return StreamResponse(artifact_update=event)

    def take(self, event: AnyEvent) -> list[StreamResponse]:
        if self.done:
            return []
        ts = event.ts.isoformat()
        if isinstance(event, StreamChunk) and event.text:
            first = not self.streamed
            self.streamed += event.text
            part = Artifact(artifact_id=ANSWER, name="answer", parts=[Part(text=event.text)])
            return [self.artifact(part, append=not first, last=False)]
        if isinstance(event, Progress) and event.stage != "accepted":
            said = progress_text(event)
            return [
                self.status("TASK_STATE_WORKING", agent_says(self.ids, said, event.event_id), ts)
            ]
        if isinstance(event, RequestCompleted):
            self.done = True
            out = []
            answer, *rest = artifacts_of(event)
            if self.streamed and event.output.startswith(self.streamed):
                tail = event.output[len(self.streamed) :]
                part = Artifact(artifact_id=ANSWER, name="answer", parts=[Part(text=tail)])
                out.append(self.artifact(part, append=True, last=True))
            else:
                out.append(self.artifact(answer, append=False, last=True))
            out += [self.artifact(a, append=False, last=True) for a in rest]
            return [*out, self.status("TASK_STATE_COMPLETED", None, ts)]
        if isinstance(event, RequestFailed):
            self.done = True
            state: TaskState = (
                "TASK_STATE_REJECTED" if event.code == "refused" else "TASK_STATE_FAILED"
            )
            return [self.status(state, agent_says(self.ids, event.error, "error"), ts)]
        if isinstance(event, RequestCancelled):
            self.done = True
            note = agent_says(self.ids, f"Cancelled: {event.reason}.", "cancelled")
            return [self.status("TASK_STATE_CANCELED", note, ts)]
        if isinstance(event, ClarificationRequested):
            self.done = True
            return [self.status("TASK_STATE_INPUT_REQUIRED", asked(self.ids, event), ts)]
        return []
