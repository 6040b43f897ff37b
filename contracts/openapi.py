"""The gateway's HTTP API as an OpenAPI 3.1 document, made from the bodies in `contracts.http`
(served at `/openapi.json`, committed as `contracts/schemas/openapi.json`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import RunAgentInput
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from contracts import a2a, http, timeline
from contracts import openai as oai

Body = type[BaseModel]


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    summary: str
    body: Body | None = None
    answers: dict[int, Body | None] = field(default_factory=dict)
    tag: str = "workflows"


ERRORS: dict[int, Body | None] = {
    401: http.ErrorResponse,
    404: http.ErrorResponse,
    422: http.ErrorResponse,
}


def read(path: str, summary: str, answer: Body | None, tag: str = "workflows") -> Operation:
    """A GET answering `answer`, or one of the usual errors."""
    return Operation("get", path, summary, answers={200: answer, **ERRORS}, tag=tag)


def remove(path: str, summary: str, tag: str = "workflows") -> Operation:
    """A DELETE answering 204 with no body, or one of the usual errors."""
    return Operation("delete", path, summary, answers={204: None, **ERRORS}, tag=tag)


OPERATIONS: tuple[Operation, ...] = (
    Operation("get", "/health", "Health", answers={200: http.Health}, tag="health"),
    Operation(
        "post",
        "/api/workflows/",
        "Start a workflow (planned by the research pipeline)",
        http.CreateWorkflow,
        {201: http.WorkflowAccepted, 429: http.ErrorResponse, **ERRORS},
    ),
    read("/api/workflows/", "The caller's workflows, newest first", http.WorkflowList),
    read(
        "/api/workflows/{workflow_id}",
        "A workflow's status, state and final output",
        http.WorkflowView,
    ),
    remove("/api/workflows/{workflow_id}", "Cancel (if running) and remove a workflow"),
    Operation(
        "post",
        "/api/workflows/{workflow_id}/feedback",
        "Answer a workflow's clarification questions",
        http.WorkflowFeedback,
        {200: http.WorkflowResumed, 409: http.ErrorResponse, **ERRORS},
    ),
    Operation(
        "post",
        "/api/workflows/{workflow_id}/chat",
        "Ask about a workflow",
        http.WorkflowChat,
        {200: http.WorkflowChatReply, 409: http.ErrorResponse, **ERRORS},
    ),
    read("/api/preferences/", "The caller's preferences", http.Preferences, tag="preferences"),
    Operation(
        "post",
        "/api/preferences/",
        "Set a preference",
        http.PreferenceIn,
        {200: http.Preference, **ERRORS},
        tag="preferences",
    ),
    remove("/api/preferences/{key}", "Remove a preference", tag="preferences"),
    read(
        "/api/approvals",
        "Pending approvals the caller may decide (an operator's queue)",
        http.ApprovalList,
        tag="approvals",
    ),
    Operation(
        "post",
        "/api/approvals/{approval_id}",
        "Decide one approval (approve or deny); the first decision stands",
        http.DecideApproval,
        {200: http.ApprovalDecided, 409: http.ErrorResponse, **ERRORS},
        tag="approvals",
    ),
    read(
        "/api/requests",
        "The caller's requests that ended failed or partial (?failed_since=SECONDS&limit=N)",
        timeline.RequestList,
        tag="requests",
    ),
    read(
        "/api/requests/{request_id}/timeline",
        "A request's timeline, in order (the owner's, or any to an operator)",
        timeline.Timeline,
        tag="requests",
    ),
    Operation(
        "post",
        "/api/requests/{request_id}/replay",
        "Replay a recorded request from a step, as a new request that acts on nothing",
        timeline.ReplayAsk,
        {202: timeline.ReplayStarted, 409: http.ErrorResponse, 429: http.ErrorResponse, **ERRORS},
        tag="requests",
    ),
    read("/api/sessions", "The caller's chat conversations", http.SessionList, tag="page"),
    read(
        "/api/sessions/{uuid}/history", "One conversation's turns", http.SessionHistory, tag="page"
    ),
    read("/api/outbox", "The caller's mail kept unsent", http.OutboxListing, tag="page"),
    Operation(
        "get", "/api/config", "The page's settings", answers={200: http.PageConfig}, tag="page"
    ),
    Operation(
        "post",
        "/v1/chat/completions",
        "OpenAI-compatible chat completion (JSON, or SSE chunks of ChatCompletionChunk when "
        "stream is true)",
        oai.ChatCompletionRequest,
        {200: oai.ChatCompletion, 400: oai.OpenAIError, 401: oai.OpenAIError, 404: oai.OpenAIError},
        tag="openai",
    ),
    Operation(
        "get",
        "/v1/models",
        "The models: sidekick, sidekick-direct",
        answers={200: oai.ModelList, 401: oai.OpenAIError},
        tag="openai",
    ),
    Operation(
        "post",
        "/ag-ui",
        "An AG-UI run: text/event-stream of AG-UI events, each with an SSE id; the same runId "
        "again (with Last-Event-ID) re-attaches, `resume` answers an interrupt",
        RunAgentInput,
        {200: None, 409: http.ErrorResponse, 429: http.ErrorResponse, **ERRORS},
        tag="ag-ui",
    ),
    read("/ag-ui/runs/{run_id}", "Re-attach to a run (SSE) after Last-Event-ID", None, "ag-ui"),
    Operation(
        "post",
        "/ag-ui/runs/{run_id}/cancel",
        "Cancel a run's request",
        answers={202: None, 409: http.ErrorResponse, **ERRORS},
        tag="ag-ui",
    ),
    read("/.well-known/agent-card.json", "The A2A agent card", a2a.AgentCard, "a2a"),
    read("/.well-known/agent.json", "The A2A agent card (older path)", a2a.AgentCard, "a2a"),
    Operation(
        "post",
        "/a2a",
        "A2A JSON-RPC 2.0 (1.0 method names and 0.3 ones; streaming methods answer SSE)",
        a2a.JsonRpcRequest,
        {200: a2a.JsonRpcResponse, 401: http.ErrorResponse, 429: a2a.JsonRpcResponse},
        tag="a2a",
    ),
)


def document(extra: tuple[Operation, ...] = ()) -> dict[str, Any]:
    operations = (*OPERATIONS, *extra)
    models: set[Body] = set()
    for op in operations:
        if op.body is not None:
            models.add(op.body)
        models.update(m for m in op.answers.values() if m is not None)
    ordered = sorted(models, key=lambda m: m.__name__)
    refs, defs = models_json_schema(
        [(m, "validation") for m in ordered], ref_template="#/components/schemas/{model}"
    )
    paths: dict[str, dict[str, Any]] = {}
    for op in operations:
        item: dict[str, Any] = {"summary": op.summary, "tags": [op.tag], "responses": {}}
        params = [p.strip("{}") for p in op.path.split("/") if p.startswith("{")]
        if params:
            item["parameters"] = [
                {"name": p, "in": "path", "required": True, "schema": {"type": "string"}}
                for p in params
            ]
        if op.body is not None:
            item["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": refs[(op.body, "validation")]}},
            }
        for code, model in op.answers.items():
            answer: dict[str, Any] = {"description": "OK" if code < 300 else "Error"}
            if model is not None:
                answer["content"] = {"application/json": {"schema": refs[(model, "validation")]}}
            item["responses"][str(code)] = answer
        paths.setdefault(op.path, {})[op.method] = item
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Sidekick gateway",
            "version": "1",
            "description": "The workflows API (compatible with the workflow seed), the page's "
            "API, the OpenAI-compatible endpoint, AG-UI (`/ag-ui`) and A2A (`/a2a`, the agent "
            "card under `/.well-known/`). Bearer tokens when the gateway has them.",
        },
        "components": {
            "schemas": defs.get("$defs", {}),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "paths": paths,
    }


def rendered() -> str:
    return json.dumps(document(), indent=2, sort_keys=True) + "\n"
