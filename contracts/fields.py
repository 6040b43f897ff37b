"""Fields that mean the same thing in several models, each described once.

A model names the field's type here and keeps its own default on its line (`trace_id:
fields.TraceId = None`; a list's `= Field(default_factory=list)`, which mypy's pydantic plugin
sees), so a field required in one model and optional in another still shares its meaning and its
words. The JSON Schemas are those of the fields written out in full. Fields shared within one
module are described there the same way (base.py's tool call, http.py's workflow, openai.py's and
a2a.py's fields)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from contracts.base import FailureCode, ProgressStage, ToolUse, Turn, WorkflowStatus
from contracts.decisions import Question, WorkerType

# A request as a client follows it (events, end frames, records, timelines).
RequestId = Annotated[str, Field(description="The request.")]
TraceId = Annotated[str | None, Field(description="OpenTelemetry trace id (hex).")]
FailureReason = Annotated[FailureCode, Field(description="Machine-readable reason.")]
WhyFailed = Annotated[str | None, Field(description="Why it failed, if it did.")]
FinalAnswer = Annotated[str | None, Field(description="The answer, once done.")]
LifeState = Annotated[str, Field(description="Where it is in its life.")]
StatusWord = Annotated[str, Field(description="The status word clients see.")]
AskedQuestions = Annotated[list[Question], Field(description="What the user must answer.")]
WorkerKind = Annotated[WorkerType | None, Field(description="Worker kind, if any.")]
LastScore = Annotated[int | None, Field(description="The last verdict's score.")]
LastFeedback = Annotated[str | None, Field(description="The last verdict's feedback.")]

# A step of a request's way: the bus's `Progress` and the events-mode frame that carries it.
Stage = Annotated[ProgressStage, Field(description="Which step.")]
StepDetail = Annotated[str, Field(description="Human-readable detail.")]
StepAttempt = Annotated[int | None, Field(description="Attempt number, where one applies.")]
StepPassed = Annotated[bool | None, Field(description="Verdict, for 'evaluated'.")]
StepScore = Annotated[int | None, Field(description="Verdict score, for 'evaluated'.")]
StepFeedback = Annotated[str | None, Field(description="Verdict feedback, for 'evaluated'.")]
StepSuggestions = Annotated[list[str], Field(description="Verdict suggestions.")]
StepStatus = Annotated[
    WorkflowStatus | None,
    Field(description="For 'worker_step': the request's status word now (e.g. 'synthesizing')."),
]
StepTool = Annotated[
    ToolUse | None,
    Field(description="For 'worker_step': the tool call the TOOLS worker just made."),
]

# What the orchestrator sends its workers and the evaluator, and what they answer.
OriginalMessage = Annotated[str, Field(description="The user's original message.")]
RecentTurns = Annotated[list[Turn], Field(description="Recent turns of the session.")]
Clarifications = Annotated[
    list[str],
    Field(description="Questions the user already answered, with the answers ('Q: ... A: ...')."),
]
DispatchToken = Annotated[
    str | None,
    Field(
        description="The orchestrator's unguessable proof of this dispatch; the answer must "
        "carry it back, or it is refused."
    ),
]
AnswerToken = Annotated[
    str | None,
    Field(description="The dispatch_token of the message this answers (proof it was asked)."),
]
UsageEstimated = Annotated[
    bool,
    Field(
        description="True when some of `usage` (and so `cost_usd`) was counted by Sidekick "
        "because a server reported none (`usage.counted_calls`): an estimate, priced the same."
    ),
]
