"""A request's bus events, in stream order, as AG-UI events: a pure, deterministic translation
(same input, same output on every replica), so a stream replayed from the bus after a dropped
connection is event for event the one the client was reading.

    progress direct / routed / decided     STEP_STARTED (the previous step FINISHED)
    progress attempt_started n             STEP_STARTED "attempt n", STATE_DELTA /attempt
    progress attempt_finished n            STEP_FINISHED "attempt n", STEP_STARTED "evaluating n"
    progress evaluated                     STEP_FINISHED, STATE_DELTA /verdict
    progress worker_step with a tool call  TOOL_CALL_START, _ARGS, _END, _RESULT
    stream chunk                           TEXT_MESSAGE_START (first), TEXT_MESSAGE_CONTENT
    request.completed                      rest of the text, TEXT_MESSAGE_END, STATE_DELTA,
                                           RUN_FINISHED (success, usage per model)
    request.failed                         RUN_ERROR (message, code)
    request.cancelled                      RUN_FINISHED (outcome cancelled)
    a parked request (INTERRUPTS)          RUN_FINISHED (outcome interrupt, the questions; an
                                           approval's with its expiresAt)
    a request parked on the client's own   TOOL_CALL_START, _ARGS, _END per call (no result:
    tools (its question has tool_calls)    the client runs them), RUN_FINISHED (success,
                                           pendingToolCallIds)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import (
    BaseEvent,
    Interrupt,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TokenUsage,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.core.version import PROTOCOL_VERSION

from contracts import (
    OUTCOMES,
    AnyEvent,
    ClarificationRequested,
    Outcome,
    Progress,
    RequestCancelled,
    RequestCompleted,
    RequestFailed,
    StreamChunk,
    Usage,
)
from services.gateway.core.outcomes import questions_text


@dataclass(frozen=True)
class Run:
    """One AG-UI run: its thread (Sidekick's session uuid), its id, the request it follows and
    the stream sequence after which its events begin (0 for a new request; the parked event's
    sequence for a run that resumes one)."""

    thread_id: str
    run_id: str
    request_id: str
    after: int = 0


def clarification_interrupt(event: Outcome) -> Interrupt:
    assert isinstance(event, ClarificationRequested)
    if event.approval is not None:
        return approval_interrupt(event)
    properties = {q.id: {"type": "string", "description": q.question} for q in event.questions}
    schema = {
        "type": "object",
        "description": "Answers by question id (or send the answer as one string).",
        "properties": properties,
        "required": list(properties),
    }
    return _interrupt(event, "input_required", schema, {"source": event.source})


def approval_interrupt(event: ClarificationRequested) -> Interrupt:
    """An action waiting for approval: its arguments exactly as they would run, answered by
    resuming with "yes" or "no" (or the seed's approval words)."""
    assert event.approval is not None
    schema = {
        "type": "string",
        "description": "yes to approve the action, no to decline it",
        "enum": ["yes", "no"],
    }
    return _interrupt(
        event,
        "approval_required",
        schema,
        {"source": "approval", "approval": event.approval.model_dump(mode="json")},
        # The client's own check refuses to answer it after this (`isInterruptExpired`).
        expires_at=event.approval.expires_at.isoformat().replace("+00:00", "Z"),
    )


def _interrupt(
    event: ClarificationRequested,
    reason: str,
    schema: dict[str, Any],
    metadata: dict[str, Any],
    expires_at: str | None = None,
) -> Interrupt:
    """The interrupt a parked request is: its questions' words, and the answer it expects."""
    return Interrupt(
        id=event.event_id,
        reason=reason,
        message=questions_text(event),
        response_schema=schema,
        expires_at=expires_at,
        metadata={"request_id": event.request_id, **metadata},
    )


# The outcomes that park a request until the user answers, and the interrupt each becomes. A new
# parked state (an approval, say) is one entry here and one in a2a/tasks.py's STATES.
INTERRUPTS: dict[type[Outcome], Callable[[Outcome], Interrupt]] = {
    ClarificationRequested: clarification_interrupt,
}


def token_usage(used: Usage) -> list[TokenUsage]:
    if used.models:
        return [
            TokenUsage(
                model=name,
                input_tokens=m.input_tokens,
                output_tokens=m.output_tokens,
                total_tokens=m.input_tokens + m.output_tokens,
            )
            for name, m in used.models.items()
        ]
    total = used.input_tokens + used.output_tokens
    return [
        TokenUsage(
            input_tokens=used.input_tokens, output_tokens=used.output_tokens, total_tokens=total
        )
    ]


def _ms(event: AnyEvent) -> int:
    return int(event.ts.timestamp() * 1000)


@dataclass
class Translator:
    run: Run
    done: bool = False
    step: str | None = None
    streamed: str = ""
    message_open: bool = False
    messages: int = 0  # text messages started before the open one
    tools_seen: set[str] = field(default_factory=set)

    @property
    def message_id(self) -> str:
        return f"{self.run.request_id}-{self.run.after}-{self.messages}"

    def opening(self) -> list[BaseEvent]:
        state = {"request_id": self.run.request_id, "status": "working", "attempt": 0}
        return [
            RunStartedEvent(
                thread_id=self.run.thread_id,
                run_id=self.run.run_id,
                protocol_version=PROTOCOL_VERSION,
            ),
            StateSnapshotEvent(snapshot={**state, "verdict": None, "sources": []}),
        ]

    def take(self, event: AnyEvent) -> list[BaseEvent]:
        if self.done:
            return []
        if isinstance(event, StreamChunk):
            return self._text(event.text, event)
        if isinstance(event, Progress):
            return self._progress(event)
        if isinstance(event, RequestCompleted):
            return self._completed(event)
        if isinstance(event, RequestFailed):
            self.done = True
            return [
                *self._close(event),
                RunErrorEvent(message=event.error, code=event.code, timestamp=_ms(event)),
            ]
        if isinstance(event, RequestCancelled):
            self.done = True
            return [*self._close(event), self._finished(event, RunFinishedCancelledOutcome())]
        if isinstance(event, ClarificationRequested) and event.tool_calls:
            return self._handed(event)
        if isinstance(event, OUTCOMES):
            interrupt = INTERRUPTS.get(type(event))
            if interrupt is not None:
                self.done = True
                outcome = RunFinishedInterruptOutcome(interrupts=[interrupt(event)])
                delta = self._delta(event, status="awaiting_input")
                return [*self._close(event), delta, self._finished(event, outcome)]
        return []

    def _handed(self, event: ClarificationRequested) -> list[BaseEvent]:
        """The model called the client's own tools: the calls, for the client to run, and the
        run's end; the next run carries their results."""
        self.done = True
        ms = _ms(event)
        parent = f"{self.run.request_id}-{self.run.after}-calls"
        out: list[BaseEvent] = [*self._close(event)]
        for call in event.tool_calls:
            out.append(
                ToolCallStartEvent(
                    tool_call_id=call.call_id,
                    tool_call_name=call.name,
                    parent_message_id=parent,
                    timestamp=ms,
                )
            )
            if call.arguments:
                out.append(ToolCallArgsEvent(tool_call_id=call.call_id, delta=call.arguments))
            out.append(ToolCallEndEvent(tool_call_id=call.call_id, timestamp=ms))
        pending = [call.call_id for call in event.tool_calls]
        out.append(self._delta(event, status="awaiting_tool_results"))
        outcome = RunFinishedSuccessOutcome(pending_tool_call_ids=pending)
        out.append(self._finished(event, outcome))
        return out

    def _text(self, text: str, event: AnyEvent) -> list[BaseEvent]:
        if not text:
            return []
        out: list[BaseEvent] = []
        if not self.message_open:
            self.message_open = True
            out.append(
                TextMessageStartEvent(
                    message_id=self.message_id, role="assistant", timestamp=_ms(event)
                )
            )
        self.streamed += text
        out.append(
            TextMessageContentEvent(message_id=self.message_id, delta=text, timestamp=_ms(event))
        )
        return out

    def _open(self, name: str, event: AnyEvent) -> list[BaseEvent]:
        out = self._end_step(event)
        self.step = name
        out.append(StepStartedEvent(step_name=name, timestamp=_ms(event)))
        return out

    def _end_step(self, event: AnyEvent) -> list[BaseEvent]:
        if self.step is None:
            return []
        name, self.step = self.step, None
        return [StepFinishedEvent(step_name=name, timestamp=_ms(event))]

    def _progress(self, p: Progress) -> list[BaseEvent]:
        if p.tool is not None:
            return self._tool(p)
        if p.stage == "direct":
            return self._open("answering directly", p)
        if p.stage == "routed":
            return self._open("routed", p)
        if p.stage == "decided":
            return self._open(f"decided: {p.worker_type or 'no worker'}", p)
        if p.stage == "attempt_started" and p.attempt is not None:
            return [*self._open(f"attempt {p.attempt}", p), self._delta(p, attempt=p.attempt)]
        if p.stage == "attempt_finished" and p.attempt is not None:
            return self._open(f"evaluating attempt {p.attempt}", p)
        if p.stage == "evaluated":
            verdict = {"passed": p.passed, "score": p.score, "feedback": p.feedback}
            return [*self._end_step(p), self._delta(p, verdict=verdict)]
        return []

    def _tool(self, p: Progress) -> list[BaseEvent]:
        use = p.tool
        assert use is not None
        if use.call_id in self.tools_seen:  # a redelivered task repeats its calls' events
            return []
        self.tools_seen.add(use.call_id)
        ms = _ms(p)
        out: list[BaseEvent] = [
            ToolCallStartEvent(tool_call_id=use.call_id, tool_call_name=use.name, timestamp=ms)
        ]
        if use.arguments:
            out.append(ToolCallArgsEvent(tool_call_id=use.call_id, delta=use.arguments))
        out += [
            ToolCallEndEvent(tool_call_id=use.call_id, timestamp=ms),
            ToolCallResultEvent(
                message_id=f"{use.call_id}-result",
                tool_call_id=use.call_id,
                content=use.result,
                role="tool",
                timestamp=ms,
            ),
        ]
        return out

    def _completed(self, event: RequestCompleted) -> list[BaseEvent]:
        self.done = True
        out: list[BaseEvent] = []
        if event.output.startswith(self.streamed):
            out += self._text(event.output[len(self.streamed) :], event)
        else:  # what was streamed is not the answer (a later attempt won): a message of its own
            out += self._close_message(event)
            self.streamed = ""
            self.messages += 1
            out += self._text(event.output, event)
        out += self._close(event)
        sources = [s.model_dump(mode="json") for s in event.sources]
        out.append(self._delta(event, status=event.status, sources=sources))
        result = {
            "status": event.status,
            "route": event.route,
            "attempts": event.attempts,
            "score": event.score,
            "feedback": event.feedback,
            "sources": sources,
        }
        out.append(
            self._finished(event, RunFinishedSuccessOutcome(), result, token_usage(event.usage))
        )
        return out

    def _close_message(self, event: AnyEvent) -> list[BaseEvent]:
        if not self.message_open:
            return []
        self.message_open = False
        return [TextMessageEndEvent(message_id=self.message_id, timestamp=_ms(event))]

    def _close(self, event: AnyEvent) -> list[BaseEvent]:
        return [*self._close_message(event), *self._end_step(event)]

    def _delta(self, event: AnyEvent, **changes: Any) -> StateDeltaEvent:
        ops = [{"op": "replace", "path": f"/{key}", "value": v} for key, v in changes.items()]
        return StateDeltaEvent(delta=ops, timestamp=_ms(event))

    def _finished(
        self,
        event: AnyEvent,
        outcome: Any,
        result: Any = None,
        usage: list[TokenUsage] | None = None,
    ) -> RunFinishedEvent:
        return RunFinishedEvent(
            thread_id=self.run.thread_id,
            run_id=self.run.run_id,
            outcome=outcome,
            result=result,
            usage=usage,
            timestamp=_ms(event),
        )
