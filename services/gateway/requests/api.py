"""A request's story, and replaying it (docs/inspect.md):

    GET  /api/requests?failed_since=SECONDS     the caller's requests that ended failed or
                                               partial since then, newest first (`limit`)
    GET  /api/requests/{request_id}/timeline   the request's timeline (contracts/timeline.py)
    POST /api/requests/{request_id}/replay     {from?, model?, role_models?, session?} -> 202,
                                               the replay's own request id

Scoped to the caller: a request another principal owns is "not found" (404, never 403, so ids
do not leak), except to operators (SIDEKICK_APPROVERS), who read any request's timeline. A
replay runs with the caller's own rights: in the original's session when the caller owns it
(unless `session` names another), else in a session of the caller's own. It is a new request
(`replay-<id>`), goes through the intake as every request does (limits, budgets, the
session's lane), and never performs a consequential action (services/runtime/requests/
replays.py); the original's record is only read.
"""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from contracts import RequestRecord, utcnow
from contracts.replay import REPLAY_ROLES, Replay
from contracts.timeline import ReplayAsk, ReplayStarted, RequestList, RequestSummary
from services.gateway.core.auth import Auth
from services.gateway.core.errors import Conflict, Invalid, NotFound
from services.gateway.core.http import (
    REQUEST_ID,
    guarded,
    parse_body,
    path_id,
    query_limit,
    respond,
)
from services.gateway.core.intake import Intake, scoped, unscoped
from services.gateway.core.said import Accepted, Refused, Submission, TooLong, Words
from services.gateway.requests.timeline import build
from services.runtime.budgets.prices import cost, prices
from services.runtime.bus.core import Bus
from services.runtime.requests.replays import replay_id, replay_refusal

DAY = 24 * 3600
MOST = 200  # requests listed at once
SCANNED = 500  # of the caller's newest requests, looked at for a list
UNSUCCESSFUL = ("failed", "partial")
MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+\-]{0,199}$")
SESSION = re.compile(r"^[A-Za-z0-9_.:\-]{1,128}$")
KEPT_DAYS = 30  # the status bucket's retention (services/runtime/bus/topology.py)


class RequestsApi:
    def __init__(self, bus: Bus, intake: Intake, auth: Auth) -> None:
        self.bus = bus
        self.intake = intake
        self.auth = auth
        self.table = prices(bus.settings.prices)

    def routes(self) -> list[Route]:
        return [
            Route("/api/requests", guarded(self.auth, self.failed), methods=["GET"]),
            Route(
                "/api/requests/{request_id}/timeline",
                guarded(self.auth, self.timeline),
                methods=["GET"],
            ),
            Route(
                "/api/requests/{request_id}/replay",
                guarded(self.auth, self.replay),
                methods=["POST"],
            ),
        ]

    async def failed(self, request: Request, principal: str) -> Response:
        limit = query_limit(request, default=50, most=MOST)
        given = request.query_params.get("failed_since", str(KEPT_DAYS * DAY))
        try:
            since = float(given)
        except ValueError as exc:
            raise Invalid("failed_since is a number of seconds.") from exc
        if since <= 0:
            raise Invalid("failed_since is a number of seconds above 0.")
        after = utcnow() - timedelta(seconds=min(since, KEPT_DAYS * DAY))
        ids = await self.intake.recent(principal, SCANNED)
        found = await asyncio.gather(*(self.intake.record(i) for i in ids))
        shown = [
            RequestSummary(
                request_id=r.request_id,
                state=r.state,
                status=r.status,
                message=r.text[:200],
                created_at=r.created_at,
                error=r.error,
            )
            for r in found
            if r is not None
            and r.principal == principal
            and not r.hidden
            and r.state in UNSUCCESSFUL
            and r.created_at >= after
        ]
        shown.sort(key=lambda s: s.created_at, reverse=True)
        return respond(RequestList(requests=shown[:limit]))

    async def timeline(self, request: Request, principal: str) -> Response:
        record = await self._readable(request, principal)
        session = unscoped(record.principal, record.session_id)
        return respond(build(record, session, lambda usage: cost(usage, self.table)))

    async def replay(self, request: Request, principal: str) -> Response:
        record = await self._readable(request, principal)
        body = await parse_body(request, ReplayAsk)
        models = self._models(body)
        if not record.ended:
            raise Conflict(f"Request {record.request_id} is still running: replay it once it ends.")
        if record.loop is None:
            raise Conflict(
                f"Request {record.request_id} was not orchestrated (answered directly, from the "
                "cache, or ended before a decision): there is no step to replay from."
            )
        what, _, number = body.from_step.partition(":")
        if what != "decision":
            why = replay_refusal(record.loop, what, int(number))
            if why is not None:
                raise Conflict(why)
        if body.session is not None and not SESSION.match(body.session):
            raise Invalid("session: letters, digits and _.:- only, at most 128 characters.")
        owner = record.principal == principal
        uuid = body.session or (
            unscoped(principal, record.session_id) if owner else f"replay-{record.request_id}"
        )
        replay = Replay(
            of=record.request_id,
            from_step=body.from_step,
            reason=record.loop.request.reason,
            models=models,
        )
        new = Submission(
            replay_id(),
            success_criteria=record.success_criteria,
            use_evaluator=record.use_evaluator,
            skip_cache=True,
            planned=record.planned,
            preferences=record.preferences,
            history=record.history,
            on_parked="new",
            replay=replay,
        )
        said = await self.intake.say(
            principal, scoped(principal, uuid), Words(record.text), to=new, surface="requests"
        )
        if isinstance(said, Refused):
            raise said.error
        if isinstance(said, TooLong):
            raise Invalid(said.message)
        assert isinstance(said, Accepted), said
        started = ReplayStarted(
            request_id=said.request_id,
            replay_of=record.request_id,
            session=uuid,
            from_step=body.from_step,
        )
        return respond(started, 202, location=f"/api/requests/{said.request_id}/timeline")

    def _models(self, body: ReplayAsk) -> dict[str, str]:
        models = dict(body.role_models)
        if body.model is not None:
            models.setdefault("worker", body.model)
        for role, model in models.items():
            if role not in REPLAY_ROLES:
                raise Invalid(f"role_models: {role!r} is not one of {', '.join(REPLAY_ROLES)}.")
            if not MODEL_NAME.match(model):
                raise Invalid(f"model {model[:60]!r}: not a model name.")
        return models

    async def _readable(self, request: Request, principal: str) -> RequestRecord:
        """The request, when the caller owns it or is an operator; else NotFound."""
        request_id = path_id(request, "request_id", REQUEST_ID)
        record = await self.intake.record(request_id)
        mine = record is not None and record.principal == principal and not record.hidden
        operator = record is not None and principal in self.bus.settings.operators
        if record is None or not (mine or operator):
            raise NotFound(
                f"No request {request_id} (records are kept {KEPT_DAYS} days; another "
                "principal's requests are not shown)."
            )
        return record
