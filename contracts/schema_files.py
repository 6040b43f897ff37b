"""Write or compare the committed JSON Schemas and the bus's AsyncAPI document:
`python -m contracts.schema_files`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter

from contracts import (
    a2a,
    approvals,
    base,
    decisions,
    email,
    events,
    frames,
    health,
    http,
    research,
    state,
    timeline,
)
from contracts import openai as oai

SCHEMA_DIR = Path(__file__).parent / "schemas"
ASYNCAPI = SCHEMA_DIR / "asyncapi.json"
OPENAPI = SCHEMA_DIR / "openapi.json"

MODELS: dict[str, type[BaseModel] | TypeAdapter[Any]] = {
    # Bus events.
    "ChatRequested": events.ChatRequested,
    "RequestRouted": events.RequestRouted,
    "WorkerTask": events.WorkerTask,
    "WorkerResult": events.WorkerResult,
    "EvaluationRequested": events.EvaluationRequested,
    "VerdictIssued": events.VerdictIssued,
    "StreamChunk": events.StreamChunk,
    "Progress": events.Progress,
    "RequestCompleted": events.RequestCompleted,
    "RequestFailed": events.RequestFailed,
    "ClarificationRequested": events.ClarificationRequested,
    "ClarificationAnswered": events.ClarificationAnswered,
    "CancelRequested": events.CancelRequested,
    "RequestCancelled": events.RequestCancelled,
    "DeadLetter": base.DeadLetter,
    # Readiness over the bus, and the gateway's /readyz.
    "Ping": health.Ping,
    "Pong": health.Pong,
    "Readiness": health.Readiness,
    # The model's structured outputs.
    "FrontlineDecision": decisions.FrontlineDecision,
    "RouteCall": decisions.RouteCall,
    "OrchestratorDecision": decisions.OrchestratorDecision,
    "Verdict": decisions.Verdict,
    "ResearchPlan": research.ResearchPlan,
    "ResearchSynthesis": research.ResearchSynthesis,
    "EmailDraft": email.EmailDraft,
    # Records in KV and streams.
    "SessionRecord": state.SessionRecord,
    "RequestRecord": state.RequestRecord,
    "OutboxEntry": email.OutboxEntry,
    "Approval": approvals.Approval,
    # WebSocket frames, one union per direction.
    "ClientFrame": frames.CLIENT_FRAME,
    "ServerFrame": frames.SERVER_FRAME,
    # HTTP API bodies.
    "ErrorResponse": http.ErrorResponse,
    "PageConfig": http.PageConfig,
    "SessionHistory": http.SessionHistory,
    "SessionList": http.SessionList,
    "OutboxListing": http.OutboxListing,
    "CreateWorkflow": http.CreateWorkflow,
    "WorkflowFeedback": http.WorkflowFeedback,
    "WorkflowAccepted": http.WorkflowAccepted,
    "WorkflowResumed": http.WorkflowResumed,
    "WorkflowView": http.WorkflowView,
    "WorkflowList": http.WorkflowList,
    "WorkflowChat": http.WorkflowChat,
    "WorkflowChatReply": http.WorkflowChatReply,
    "PreferenceIn": http.PreferenceIn,
    "Preference": http.Preference,
    "Preferences": http.Preferences,
    "PreferencesRecord": http.PreferencesRecord,
    "Health": http.Health,
    # The OpenAI-compatible endpoint.
    "ChatCompletionRequest": oai.ChatCompletionRequest,
    "ChatCompletion": oai.ChatCompletion,
    "ChatCompletionChunk": oai.ChatCompletionChunk,
    "ModelList": oai.ModelList,
    "OpenAIError": oai.OpenAIError,
    # A2A (services/gateway/a2a/): the card, a task, one event of a stream, a page of tasks.
    "A2AAgentCard": a2a.AgentCard,
    "A2ATask": a2a.Task,
    "A2AStreamResponse": a2a.StreamResponse,
    "A2AListTasksResponse": a2a.ListTasksResponse,
    "A2ATaskPushNotificationConfig": a2a.TaskPushNotificationConfig,
    "A2APushConfigs": a2a.PushConfigs,
    # A request's timeline and its replay (services/gateway/requests/).
    "Timeline": timeline.Timeline,
    "ReplayAsk": timeline.ReplayAsk,
    "ReplayStarted": timeline.ReplayStarted,
    "RequestList": timeline.RequestList,
}


def render(model: type[BaseModel] | TypeAdapter[Any]) -> str:
    adapter = model if isinstance(model, TypeAdapter) else TypeAdapter(model)
    schema = adapter.json_schema()
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def write_all() -> list[Path]:
    from contracts import openapi
    from contracts.asyncapi import document

    SCHEMA_DIR.mkdir(exist_ok=True)
    written = []
    for name, model in MODELS.items():
        path = SCHEMA_DIR / f"{name}.json"
        path.write_text(render(model), encoding="utf-8")
        written.append(path)
    ASYNCAPI.write_text(document(), encoding="utf-8")
    OPENAPI.write_text(openapi.rendered(), encoding="utf-8")
    return [*written, ASYNCAPI, OPENAPI]


if __name__ == "__main__":
    for p in write_all():
        print(p)
