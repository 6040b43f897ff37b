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

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from contracts import RequestRecord, new_id
from contracts.http import (
    CreateWorkflow,
    ValidationDetail,
    WorkflowAccepted,
    WorkflowFeedback,
    WorkflowList,
    WorkflowResumed,
    WorkflowState,
    WorkflowSummary,
    WorkflowView,
)
from services.gateway.api import REQUEST_ID, guarded, parse_body, path_id, query_limit, respond
from services.gateway.auth import Auth
from services.gateway.errors import Conflict, Invalid
from services.gateway.intake import Intake, scoped, unscoped
from services.gateway.intake import Request as NewRequest

MAX_LIST = 200


def view(record: RequestRecord) -> WorkflowView:
    return WorkflowView(
        workflow_id=record.request_id,
        status=record.status,
        state=WorkflowState(
            text=record.text,
            success_criteria=record.success_criteria,
            session=unscoped(record.principal, record.session_id),
            clarification_questions=record.clarification_questions,
            worker_type=record.worker_type,
            attempt=record.attempt,
            detail=record.detail,
            error=record.error,
            trace_id=record.trace_id,
            cached=record.cached,
        ),
        created_at=record.created_at,
        updated_at=record.updated_at,
        completed_at=record.completed_at,
        final_output=record.final_output,
    )


def summary(record: RequestRecord) -> WorkflowSummary:
    return WorkflowSummary(
        workflow_id=record.request_id,
        status=record.status,
        text=record.text,
        created_at=record.created_at,
        updated_at=record.updated_at,
        completed_at=record.completed_at,
    )


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
                [ValidationDetail(loc=["body", "text"], msg="too long", type="string_too_long")],
            )
        workflow_id = new_id()
        new = NewRequest(
            session_id=scoped(principal, f"workflow-{workflow_id}"),
            text=body.text,
            success_criteria=body.success_criteria,
            skip_cache=body.skip_cache,
        )
        await self.intake.submit(principal, new, workflow_id, generated=True)
        accepted = WorkflowAccepted(
            workflow_id=workflow_id, status="queued", message="Workflow accepted."
        )
        return respond(accepted, 201, location=f"/api/workflows/{workflow_id}")

    async def list(self, request: Request, principal: str) -> Response:
        limit = query_limit(request, default=50, most=MAX_LIST)
        ids = await self.intake.recent(principal, limit)
        found = await asyncio.gather(*(self.intake.record(rid) for rid in ids))
        items = [summary(s) for s in found if s is not None and s.principal == principal]
        return respond(WorkflowList(workflows=items))

    async def get(self, request: Request, principal: str) -> Response:
        status = await self.intake.owned(principal, path_id(request, "workflow_id", REQUEST_ID))
        return respond(view(status))

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
                    ValidationDetail(loc=["body", "responses", u], msg="unknown", type="key")
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
        return respond(
            WorkflowResumed(
                workflow_id=workflow_id,
                status="resumed",
                message="Thanks: the workflow continues with your answers.",
            )
        )
