"""The workflows HTTP API (compatible with the workflow seed), on the same pipeline and bus as
chat: a workflow is a request in its own session `workflow-<id>` under the caller's principal,
planned by the research pipeline (never answered directly by the frontline).

    POST   /api/workflows[/]               {text, skip_cache?, success_criteria?} -> 201 started
    GET    /api/workflows[/]               the caller's, newest first, as a list (?limit=)
    GET    /api/workflows/{id}             status, state, times, final_output
    POST   /api/workflows/{id}/feedback    {responses: {question_id: answer}, ...} -> 200 resumed
    POST   /api/workflows/{id}/chat        {message} -> {response, history}
    DELETE /api/workflows/{id}             cancel if running, and remove -> 204

Both forms of a collection's path are answered directly (a redirect would break a CORS
preflight, which browsers refuse to follow).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from contracts import (
    OUTCOMES,
    AnyEvent,
    ClarificationRequested,
    Outcome,
    RequestCompleted,
    RequestFailed,
    RequestRecord,
    new_id,
)
from contracts.http import (
    CreateWorkflow,
    ValidationDetail,
    WorkflowAccepted,
    WorkflowChat,
    WorkflowChatReply,
    WorkflowFeedback,
    WorkflowList,
    WorkflowResumed,
)
from services.gateway.core.auth import Auth
from services.gateway.core.errors import Conflict, Invalid, Unavailable
from services.gateway.core.http import (
    REQUEST_ID,
    guarded,
    parse_body,
    path_id,
    query_limit,
    respond,
)
from services.gateway.core.hub import Hub
from services.gateway.core.intake import Intake
from services.gateway.core.outcomes import questions_text
from services.gateway.core.preferences import PreferenceStore
from services.gateway.core.said import Refused, Reply, Said, Submission, TooLong, Words
from services.gateway.workflows.views import chat_history, is_workflow, view, workflow_session
from services.runtime.bus.core import Bus
from services.runtime.requests.lifecycle import records
from services.runtime.requests.sessions import load_session

MAX_LIST = 200
CHAT_WAIT = 300.0  # seconds a workflow chat call waits for its answer
# The frontend answers all open questions with one free-text field under this key.
FREE_TEXT = "clarification"


class Workflows:
    def __init__(
        self, bus: Bus, hub: Hub[Any], intake: Intake, auth: Auth, preferences: PreferenceStore
    ) -> None:
        self.bus = bus
        self.hub = hub
        self.intake = intake
        self.auth = auth
        self.preferences = preferences

    def routes(self) -> list[Route]:
        g = self.auth
        one = "/api/workflows/{workflow_id}"
        routes = [
            Route(one, guarded(g, self.get), methods=["GET"]),
            Route(one, guarded(g, self.delete), methods=["DELETE"]),
            Route(f"{one}/feedback", guarded(g, self.feedback), methods=["POST"]),
            Route(f"{one}/chat", guarded(g, self.chat), methods=["POST"]),
        ]
        for path in ("/api/workflows", "/api/workflows/"):
            routes.append(Route(path, guarded(g, self.create), methods=["POST"]))
            routes.append(Route(path, guarded(g, self.list), methods=["GET"]))
        return routes

    async def create(self, request: Request, principal: str) -> Response:
        body = await parse_body(request, CreateWorkflow)
        workflow_id = new_id()
        new = Submission(
            workflow_id,
            success_criteria=body.success_criteria,
            skip_cache=body.skip_cache,
            planned=True,
            preferences=await self.preferences.load(principal),
            on_parked="new",
        )
        session_id = workflow_session(principal, workflow_id)
        said = await self.intake.say(
            principal, session_id, Words(body.text), to=new, surface="workflows"
        )
        rendered(said, "text")
        accepted = WorkflowAccepted(
            workflow_id=workflow_id,
            status="started",
            message="Workflow initialized and running in the background.",
        )
        return respond(accepted, 201, location=f"/api/workflows/{workflow_id}")

    async def list(self, request: Request, principal: str) -> Response:
        limit = query_limit(request, default=50, most=MAX_LIST)
        ids = await self.intake.recent(principal, MAX_LIST)
        found = await asyncio.gather(*(self.intake.record(rid) for rid in ids))
        mine = [
            r
            for r in found
            if r is not None and r.principal == principal and not r.hidden and is_workflow(r)
        ]
        return respond(WorkflowList([view(r) for r in mine[:limit]]))

    async def get(self, request: Request, principal: str) -> Response:
        record = await self._workflow(request, principal)
        session = await load_session(self.bus, record.session_id)
        return respond(view(record, session.turns))

    async def delete(self, request: Request, principal: str) -> Response:
        record = await self._workflow(request, principal)
        if not record.ended:
            with contextlib.suppress(Conflict):  # it ended meanwhile
                await self.intake.cancel(principal, record.request_id)
        try:
            await records(self.bus).hide(record.request_id)
        except Exception as exc:
            raise Unavailable("The workflow store is unavailable; please retry.") from exc
        return Response(status_code=204)

    async def feedback(self, request: Request, principal: str) -> Response:
        body = await parse_body(request, WorkflowFeedback)
        record = await self._workflow(request, principal)
        workflow_id = record.request_id
        if record.status != "awaiting_clarification":
            raise Conflict(
                f"Workflow {workflow_id} is not waiting for feedback (it is {record.status})."
            )
        if record.state == "awaiting_approval":
            return await self._decide(principal, record, body)
        questions = {q.id: q.question for q in record.clarification_questions}
        unknown = sorted(set(body.responses) - set(questions) - {FREE_TEXT})
        if unknown:
            raise Invalid(
                f"Unknown question id(s): {', '.join(unknown)}; "
                f"open questions: {', '.join(questions) or 'none'} (or '{FREE_TEXT}' for one "
                "answer to all).",
                [
                    ValidationDetail(loc=["body", "responses", u], msg="unknown", type="key")
                    for u in unknown
                ],
            )
        if not body.responses and not body.additional_context and body.approval is None:
            raise Invalid("Give at least one answer in responses (or additional_context).")
        extra = [body.additional_context] if body.additional_context else []
        if body.approval is not None:
            approval = body.approval
            word = (
                approval if isinstance(approval, str) else ("approved" if approval else "rejected")
            )
            extra.append(f"Approval: {word}.")
        if body.ratings:
            extra.append("Ratings: " + ", ".join(f"{k}={v}" for k, v in body.ratings.items()))
        # Answers by id go as answers; the page's one field answers every question at once.
        answers = {q: a for q, a in body.responses.items() if q != FREE_TEXT}
        free = body.responses.get(FREE_TEXT, "")
        words = Words(
            free if free or answers else "\n".join(extra),
            answers=answers,
            additional_context="\n".join(extra) or None,
        )
        said = await self.intake.say(
            principal, record.session_id, words, to=Reply(workflow_id), surface="workflows"
        )
        rendered(said, "responses")
        return respond(
            WorkflowResumed(
                workflow_id=workflow_id,
                status="resumed",
                message="Feedback received, workflow resuming.",
            )
        )

    async def _decide(
        self, principal: str, record: RequestRecord, body: WorkflowFeedback
    ) -> Response:
        """Feedback on a workflow waiting for approval: the seed's approval word (or
        true/false, or a yes/no answer) decides the action."""
        if isinstance(body.approval, bool):
            words = "approved" if body.approval else "rejected"
        else:
            words = body.approval or next(iter(body.responses.values()), "")
        decision = Words(words, approval_id=body.approval_id)
        said = await self.intake.say(
            principal,
            record.session_id,
            decision,
            to=Reply(record.request_id),
            surface="workflows",
        )
        rendered(said, "approval")
        return respond(
            WorkflowResumed(
                workflow_id=record.request_id,
                status="resumed",
                message=f"Decision received ({words}), workflow resuming.",
            )
        )

    async def chat(self, request: Request, principal: str) -> Response:
        """A question about the workflow, answered in its session (the agents see its request,
        questions, answers and result as the conversation so far), after the workflow itself
        when it is still running."""
        body = await parse_body(request, WorkflowChat)
        record = await self._workflow(request, principal)
        if record.status == "awaiting_clarification":
            raise Conflict(
                f"Workflow {record.request_id} is waiting for answers to its questions: send "
                "them to its /feedback."
            )
        request_id = new_id()
        new = Submission(request_id, on_parked="new")
        async with self.hub.watch(request_id, record.session_id) as events:
            said = await self.intake.say(
                principal, record.session_id, Words(body.message), to=new, surface="workflows"
            )
            rendered(said, "message")
            outcome = await self._outcome(request_id, events)
        if isinstance(outcome, RequestCompleted):
            response = outcome.output
        elif isinstance(outcome, ClarificationRequested):
            response = questions_text(outcome)
        elif isinstance(outcome, RequestFailed):
            response = f"Sorry, I could not answer that: {outcome.error}"
        else:
            response = "The question was cancelled before it was answered."
        session = await load_session(self.bus, record.session_id)
        fresh = await self.intake.record(record.request_id)
        return respond(
            WorkflowChatReply(
                response=response,
                history=chat_history(fresh or record, session.turns),
                request_id=request_id,
            )
        )

    async def _outcome(self, request_id: str, events: asyncio.Queue[AnyEvent]) -> Outcome:
        try:
            async with asyncio.timeout(CHAT_WAIT):
                while True:
                    event = await events.get()
                    if isinstance(event, OUTCOMES):
                        return event
        except TimeoutError:
            stored = await self.intake.outcome(request_id)
            if stored is not None:
                return stored
            raise Unavailable(f"No answer within {CHAT_WAIT:g} s; request {request_id}.") from None

    async def _workflow(self, request: Request, principal: str) -> RequestRecord:
        """The caller's workflow; any of its requests reads the same way (a chat request's
        status, or an answer to its question, through this API too)."""
        return await self.intake.owned(principal, path_id(request, "workflow_id", REQUEST_ID))


def rendered(said: Said, field: str) -> None:
    """A refusal of the intake as this API has it (taken: nothing to say): over the message
    limit, a 422 naming the body's field, as FastAPI's clients know it."""
    if isinstance(said, TooLong):
        raise Invalid(
            f"{field} is limited to {said.limit} characters.",
            [ValidationDetail(loc=["body", field], msg="too long", type="string_too_long")],
        )
    if isinstance(said, Refused):
        raise said.error
