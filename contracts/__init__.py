"""Sidekick's wire format: typed events, the model's structured outputs, subject names.

No I/O lives here. JSON Schemas of every model are committed under `contracts/schemas/` and
compared by a test, so a wire change is always a visible diff (`python -m contracts.schemas`
rewrites them).
"""

from contracts.base import Event, Model, ModelUsage, Source, Turn, Usage, new_id, utcnow
from contracts.decisions import (
    WORKER_DESCRIPTIONS,
    FrontlineDecision,
    OrchestratorDecision,
    Parameter,
    Question,
    Verdict,
    WorkerType,
)
from contracts.events import (
    EVENT_ADAPTER,
    AnyEvent,
    CancelRequested,
    ChatRequested,
    ClarificationAnswered,
    ClarificationRequested,
    EvaluationRequested,
    OrchestratorDecided,
    Progress,
    RequestCancelled,
    RequestCompleted,
    RequestFailed,
    RequestRouted,
    StreamChunk,
    TerminalEvent,
    VerdictIssued,
    WorkerResult,
    WorkerTask,
    parse_event,
)
from contracts.state import FINAL_STATUSES, RequestStatus, SessionRecord, WorkflowStatus
from contracts.subjects import DEFAULT, Subjects

__all__ = [
    "DEFAULT",
    "EVENT_ADAPTER",
    "FINAL_STATUSES",
    "WORKER_DESCRIPTIONS",
    "AnyEvent",
    "CancelRequested",
    "ChatRequested",
    "ClarificationAnswered",
    "ClarificationRequested",
    "EvaluationRequested",
    "Event",
    "FrontlineDecision",
    "Model",
    "ModelUsage",
    "OrchestratorDecided",
    "OrchestratorDecision",
    "Parameter",
    "Progress",
    "Question",
    "RequestCancelled",
    "RequestCompleted",
    "RequestFailed",
    "RequestRouted",
    "RequestStatus",
    "SessionRecord",
    "Source",
    "StreamChunk",
    "Subjects",
    "TerminalEvent",
    "Turn",
    "Usage",
    "Verdict",
    "VerdictIssued",
    "WorkerResult",
    "WorkerTask",
    "WorkerType",
    "WorkflowStatus",
    "new_id",
    "parse_event",
    "utcnow",
]
