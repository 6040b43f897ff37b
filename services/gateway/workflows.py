"""The workflows HTTP API (compatible with the workflow seed), on the same pipeline and bus as
chat: a workflow is a request in its own session `workflow-<id>` under the caller's principal.

    POST   /api/workflows                 {text, skip_cache?, success_criteria?} -> 201
    GET    /api/workflows                 the caller's, newest first (?limit=, max 200)
    GET    /api/workflows/{id}            status, state, times, final_output
    POST   /api/workflows/{id}/feedback   {responses: {question_id: answer}, ...} -> 200 resumed
    DELETE /api/workflows/{id}            cancel -> 204
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from contracts import RequestRecord, new_id
from services.gateway.api import REQUEST_ID, guarded, parse_body, path_id
from services.gateway.auth import Auth
from services.gateway.errors import Conflict, Invalid
from services.gateway.intake import Intake, scoped, unscoped
from services.gateway.intake import Request as NewRequest

MAX_LIST = 200


class Body(BaseModel):
    """Lenient about unknown keys (the seed's clients send extras), strict about types."""

    model_config = ConfigDict(frozen=True, extra="ignore")


class CreateWorkflow(Body):
    text: StrictStr = Field(min_length=1, description="What to do.")
    skip_cache: StrictBool = Field(default=False, description="Bypass the semantic cache.")
    success_criteria: StrictStr | None = Field(default=None, description="How to judge it.")


class WorkflowFeedback(Body):
    responses: dict[StrictStr, StrictStr] = Field(
        default_factory=dict, description="Answers by question id."
    )
    ratings: dict[StrictStr, StrictInt | StrictFloat | StrictStr] | None = Field(
        default=None, description="Ratings, passed on as context."
    )
    approval: StrictBool | None = Field(default=None, description="Approval, passed on.")
    additional_context: StrictStr | None = Field(default=None, description="Anything else.")


def view(status: RequestRecord) -> dict[str, Any]:
    return {
        "workflow_id": status.request_id,
        "status": status.status,
        "state": {
            "text": status.text,
            "success_criteria": status.success_criteria,
            "session": unscoped(status.principal, status.session_id),
            "clarification_questions": [q.model_dump() for q in status.clarification_questions],
            "worker_type": status.worker_type,
            "attempt": status.attempt,
            "detail": status.detail,
            "error": status.error,
            "trace_id": status.trace_id,
            "cached": status.cached,
        },
        "created_at": status.created_at.isoformat(),
        "updated_at": status.updated_at.isoformat(),
        "completed_at": status.completed_at.isoformat() if status.completed_at else None,
        "final_output": status.final_output,
    }


def summary(status: RequestRecord) -> dict[str, Any]:
    return {
        "workflow_id": status.request_id,
        "status": status.status,
        "text": status.text,
        "created_at": status.created_at.isoformat(),
        "updated_at": status.updated_at.isoformat(),
        "completed_at": status.completed_at.isoformat() if status.completed_at else None,
    }


class Workflows:
    def __init__(self, intake: Intake, auth: Auth, max_chars: int) -> None:
        self.intake = intake
        self.auth = auth
        self.max_chars = max_chars

    def routes(self) -> list[Route]:
        g = self.auth
        return [
            Route("/api/workflows", guarded(g, self.create), methods=["POST"]),
            Route("/api/workflows", guarded(g, self.list), methods=["GET"]),
            Route("/api/workflows/{workflow_id}", guarded(g, self.get), methods=["GET"]),
            Route("/api/workflows/{workflow_id}", guarded(g, self.delete), methods=["DELETE"]),
            Route(
                "/api/workflows/{workflow_id}/feedback",
                guarded(g, self.feedback),
                methods=["POST"],
            ),
        ]

    async def create(self, request: Request, principal: str) -> Response:
        body = await parse_body(request, CreateWorkflow)
        if len(body.text) > self.max_chars:
            raise Invalid(
                f"text is limited to {self.max_chars} characters.",
                [{"loc": ["body", "text"], "msg": "too long", "type": "string_too_long"}],
            )
        workflow_id = new_id()
        new = NewRequest(
            session_id=scoped(principal, f"workflow-{workflow_id}"),
            text=body.text,
            success_criteria=body.success_criteria,
            skip_cache=body.skip_cache,
        )
        await self.intake.submit(principal, new, workflow_id)
        return JSONResponse(
            {"workflow_id": workflow_id, "status": "queued", "message": "Workflow accepted."},
            status_code=201,
            headers={"location": f"/api/workflows/{workflow_id}"},
        )

    async def list(self, request: Request, principal: str) -> Response:
        try:
            limit = max(1, min(int(request.query_params.get("limit", "50")), MAX_LIST))
        except ValueError as exc:
            raise Invalid("limit must be a whole number.") from exc
        ids = await self.intake.recent(principal, limit)
        found = await asyncio.gather(*(self.intake.record(rid) for rid in ids))
        items = [summary(s) for s in found if s is not None and s.principal == principal]
        return JSONResponse({"workflows": items})

    async def get(self, request: Request, principal: str) -> Response:
        status = await self.intake.owned(principal, path_id(request, "workflow_id", REQUEST_ID))
        return JSONResponse(view(status))

    async def delete(self, request: Request, principal: str) -> Response:
        workflow_id = path_id(request, "workflow_id", REQUEST_ID)
        status = await self.intake.owned(principal, workflow_id)
        if not status.ended:
            # Conflict: it ended meanwhile, and cancelling what has ended is already done.
            with contextlib.suppress(Conflict):
                await self.intake.cancel(principal, workflow_id)
        return Response(status_code=204)

    async def feedback(self, request: Request, principal: str) -> Response:
        workflow_id = path_id(request, "workflow_id", REQUEST_ID)
        body = await parse_body(request, WorkflowFeedback)
        status = await self.intake.owned(principal, workflow_id)
        if status.status != "awaiting_clarification":
            raise Conflict(
                f"Workflow {workflow_id} is not waiting for feedback (it is {status.status})."
            )
        questions = {q.id: q.question for q in status.clarification_questions}
        unknown = sorted(set(body.responses) - set(questions))
        if unknown:
            raise Invalid(
                f"Unknown question id(s): {', '.join(unknown)}; "
                f"open questions: {', '.join(questions) or 'none'}.",
                [
                    {"loc": ["body", "responses", u], "msg": "unknown", "type": "key"}
                    for u in unknown
                ],
            )
        if not body.responses and not body.additional_context and body.approval is None:
            raise Invalid("Give at least one answer in responses (or additional_context).")
        message = "\n".join(f"{questions[q]} {a}" for q, a in body.responses.items())
        extra = [body.additional_context] if body.additional_context else []
        if body.approval is not None:
            extra.append("Approved." if body.approval else "Not approved.")
        if body.ratings:
            extra.append("Ratings: " + ", ".join(f"{k}={v}" for k, v in body.ratings.items()))
        await self.intake.answer(
            principal,
            workflow_id,
            message=message or "\n".join(extra),
            answers=dict(body.responses),
            additional_context="\n".join(extra) or None,
        )
        return JSONResponse(
            {
                "workflow_id": workflow_id,
                "status": "resumed",
                "message": "Thanks: the workflow continues with your answers.",
            }
        )
