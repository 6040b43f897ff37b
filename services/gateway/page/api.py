"""The web page at `/` (its files under `static/`, shipped as package data) and the small API it
reads: `GET /api/config` (public), and the principal's `GET /api/sessions`,
`GET /api/sessions/{uuid}/history` and `GET /api/outbox`."""

from __future__ import annotations

import asyncio
from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from contracts import SessionRecord
from contracts.http import (
    OpenQuestion,
    OutboxListing,
    PageConfig,
    SessionHistory,
    SessionList,
    SessionSummary,
)
from services.gateway.core.auth import Auth
from services.gateway.core.errors import Invalid, NotFound
from services.gateway.core.http import guarded, path_id, query_limit, respond
from services.gateway.core.intake import Intake, scoped, unscoped
from services.runtime.base.settings import LOCAL_MODEL_NOTICE
from services.runtime.bus.core import Bus
from services.runtime.bus.kvstore import get_model, key_for
from services.runtime.requests import outbox

STATIC = Path(__file__).parent / "static"
# The page loads only its own files and talks only to its own origin.
PAGE_HEADERS = {
    "content-security-policy": "default-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-cache",
}
OUTBOX_SCAN = 500
# The sidebar groups the principal's newest requests by conversation; older ones drop off it
# (their sessions still open by uuid).
SESSIONS_SCAN = 200
TITLE_CHARS = 80


async def page(_: Request) -> Response:
    return FileResponse(STATIC / "index.html", headers=PAGE_HEADERS)


async def favicon(_: Request) -> Response:
    # Browsers ask for /favicon.ico on their own, whatever the page links.
    return FileResponse(
        STATIC / "favicon.ico",
        media_type="image/x-icon",
        headers={"cache-control": "max-age=86400"},
    )


class PageApi:
    """`GET /api/config` (public), and the principal's `GET /api/sessions` (conversations,
    newest first), `GET /api/sessions/{uuid}/history` and `GET /api/outbox` (mail kept unsent
    because no SendGrid key is set; optional query: `limit` 1-200, default 50, and `session`, a
    client uuid, for one conversation's mail)."""

    def __init__(self, bus: Bus, intake: Intake, auth: Auth) -> None:
        self.bus = bus
        self.intake = intake
        self.auth = auth

    def routes(self) -> list[BaseRoute]:
        g = self.auth
        return [
            Route("/", page),
            Route("/favicon.ico", favicon),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
            Route("/api/config", self.config),
            Route("/api/sessions", guarded(g, self.sessions)),
            Route("/api/sessions/{uuid}/history", guarded(g, self.history)),
            Route("/api/outbox", guarded(g, self.outbox), methods=["GET"]),
        ]

    async def config(self, _: Request) -> Response:
        settings = self.bus.settings
        return respond(
            PageConfig(
                auth_required=self.auth.required,
                max_message_chars=settings.max_message_chars,
                model_notice=LOCAL_MODEL_NOTICE if settings.local_model else None,
            )
        )

    async def sessions(self, request: Request, principal: str) -> Response:
        """The principal's chat conversations (workflows have their own list), from the
        gateway's index of its requests: uuid, title (the first message seen), last activity,
        and how many of the scanned requests belong to it."""
        try:
            limit = min(max(int(request.query_params.get("limit", "30")), 1), 100)
        except ValueError as exc:
            raise Invalid("limit must be a whole number.") from exc
        ids = await self.intake.recent(principal, SESSIONS_SCAN)
        found = await asyncio.gather(*(self.intake.load(rid) for rid in ids))
        by_uuid: dict[str, SessionSummary] = {}
        for tracked in found:  # newest first
            if tracked is None or tracked.value.principal != principal:
                continue
            record = tracked.value
            uuid = unscoped(principal, record.session_id)
            if uuid.startswith("workflow-"):
                continue
            seen = by_uuid.get(uuid)
            by_uuid[uuid] = SessionSummary(
                uuid=uuid,
                title=record.text[:TITLE_CHARS],  # older requests overwrite: the first message
                updated_at=seen.updated_at if seen else record.updated_at,
                requests=(seen.requests if seen else 0) + 1,
            )
        return respond(SessionList(sessions=list(by_uuid.values())[:limit]))

    async def history(self, request: Request, principal: str) -> Response:
        uuid = path_id(request, "uuid")
        record, revision = await get_model(
            self.bus.kv.sessions, key_for(scoped(principal, uuid)), SessionRecord
        )
        if record is None and revision == 0:
            raise NotFound(f"No session {uuid}.")
        record = record or SessionRecord()
        parked: OpenQuestion | None = None
        if record.parked is not None:
            status = await self.intake.record(record.parked)
            if (
                status
                and status.principal == principal
                and status.status == "awaiting_clarification"
            ):
                parked = OpenQuestion(
                    request_id=status.request_id,
                    text=status.text,
                    questions=status.clarification_questions,
                )
        return respond(SessionHistory(session=uuid, turns=record.turns, parked=parked))

    async def outbox(self, request: Request, principal: str) -> Response:
        limit = query_limit(request, default=50, most=200)
        entries = await outbox.read(self.bus.js, self.bus.subjects, limit=OUTBOX_SCAN)
        mine = outbox.visible_to(entries, principal, request.query_params.get("session"))
        note = f"Outbox mail was NOT sent: {outbox.SEND_HINT}"
        return respond(OutboxListing(note=note, entries=mine[:limit]))
