"""The operator's approvals queue: approvals are decided by the request's own principal on the
surface they asked from, or by an operator (a principal named in SIDEKICK_APPROVERS), who
sees every approval it may decide here, whoever's request it is.

    GET  /api/approvals                  pending approvals the caller may decide, oldest first
    POST /api/approvals/{approval_id}    {decision: approve|deny} -> the decided approval

The queue is read from the `parked` bucket (the requests parked now, each with the approval it
waits on), never by scanning every approval kept. An approval the caller may not decide is
answered as not found, as another principal's request is. Deciding goes through the same
compare-and-set as every other surface: the first decision stands.
"""

from __future__ import annotations

import asyncio
import logging
import re

import nats.js.errors
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from contracts.approvals import Approval
from contracts.http import ApprovalDecided, ApprovalList, DecideApproval
from services.gateway.core.auth import Auth
from services.gateway.core.errors import NotFound, Unavailable
from services.gateway.core.http import guarded, parse_body, path_id, respond
from services.gateway.core.intake import Intake
from services.runtime.approvals.records import Approvals, Parked
from services.runtime.bus.core import Bus

log = logging.getLogger("sidekick.gateway")

APPROVAL_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MOST = 200  # approvals listed at once


class ApprovalsApi:
    def __init__(self, bus: Bus, intake: Intake, auth: Auth) -> None:
        self.bus = bus
        self.intake = intake
        self.auth = auth

    def routes(self) -> list[Route]:
        return [
            Route("/api/approvals", guarded(self.auth, self.pending), methods=["GET"]),
            Route(
                "/api/approvals/{approval_id}",
                guarded(self.auth, self.decide),
                methods=["POST"],
            ),
        ]

    async def pending(self, _: Request, principal: str) -> Response:
        try:
            waiting = await self._waiting()
        except Exception as exc:
            raise Unavailable("The approval store is unavailable; please retry.") from exc
        mine = [a for a in waiting if a.state == "pending" and principal in a.approvers]
        mine.sort(key=lambda a: a.created_at)
        return respond(ApprovalList(approvals=mine[:MOST]))

    async def decide(self, request: Request, principal: str) -> Response:
        approval_id = path_id(request, "approval_id", APPROVAL_ID)
        body = await parse_body(request, DecideApproval)
        try:
            found = await Approvals(self.bus.kv.approvals).load(approval_id)
        except Exception as exc:
            raise Unavailable("The approval store is unavailable; please retry.") from exc
        if found is None or principal not in found.value.approvers:
            raise NotFound(f"No approval {approval_id}.")
        approval = found.value
        tracked = await self.intake.load(approval.request_id)
        if tracked is None:
            raise NotFound(f"No approval {approval_id}.")
        record = await self.intake.decide(principal, tracked, body.decision, approval.approval_id)
        decided = await Approvals(self.bus.kv.approvals).load(approval_id)
        return respond(
            ApprovalDecided(
                approval=decided.value if decided is not None else approval,
                request_id=record.request_id,
                status=record.status,
            )
        )

    async def _waiting(self) -> list[Approval]:
        """The approvals the parked requests wait on."""
        parked = self.bus.kv.parked
        try:
            keys = await parked.keys()
        except nats.js.errors.NoKeysError:
            return []
        ids = []
        for key in keys:
            try:
                entry = await parked.get(key)
            except nats.js.errors.KeyNotFoundError:
                continue  # resumed meanwhile
            try:
                waits_on = Parked.decode(entry.value).approval_id
            except ValueError:
                continue
            if waits_on is not None:
                ids.append(waits_on)
        store = Approvals(self.bus.kv.approvals)
        found = await asyncio.gather(*(store.load(i) for i in ids))
        return [f.value for f in found if f is not None]
