"""Plumbing shared by the HTTP API routes (who is asking, bodies, errors), plus the small
routes the web page needs: its configuration and a session's history."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from typing import TypeVar

from pydantic import BaseModel, ValidationError
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from contracts import SessionRecord, openapi
from contracts.frames import ID_PATTERN, REQUEST_ID_PATTERN
from contracts.http import (
    Health,
    HttpBody,
    OpenQuestion,
    OutboxListing,
    PageConfig,
    SessionHistory,
    SessionList,
    SessionSummary,
    ValidationDetail,
    WorkflowList,
)
from services.gateway.auth import Auth
from services.gateway.errors import (
    GatewayError,
    Invalid,
    NotFound,
    RateLimited,
    TooLarge,
    Unauthorized,
)
from services.gateway.intake import Intake, scoped, unscoped
from services.runtime.base.settings import LOCAL_MODEL_NOTICE, Settings
from services.runtime.bus.core import Bus
from services.runtime.bus.kvstore import get_model, key_for
from services.runtime.requests import outbox
from services.runtime.walls import jsonlimits

M = TypeVar("M", bound=BaseModel)
Handler = Callable[[Request, str], Awaitable[Response]]

MAX_BODY_BYTES = 256 * 1024
OUTBOX_SCAN = 500
# The sidebar groups the principal's newest requests by conversation; older ones drop off it
# (their sessions still open by uuid).
SESSIONS_SCAN = 200
TITLE_CHARS = 80
_ID = re.compile(ID_PATTERN)
REQUEST_ID = re.compile(REQUEST_ID_PATTERN)


def principal_of(request: Request, auth: Auth) -> str:
    present, principal = auth.from_header(request)
    if principal is None:
        raise Unauthorized(
            "Invalid bearer token." if present else "Send Authorization: Bearer <token>."
        )
    return principal


def respond(body: HttpBody | WorkflowList, status_code: int = 200, **headers: str) -> JSONResponse:
    return JSONResponse(body.wire(), status_code=status_code, headers=headers)


def error_response(exc: GatewayError) -> JSONResponse:
    headers = {"www-authenticate": "Bearer"} if exc.http_status == 401 else {}
    if isinstance(exc, RateLimited):
        headers["retry-after"] = str(exc.retry_after)
    return JSONResponse(exc.body().wire(), status_code=exc.http_status, headers=headers)


def guarded(auth: Auth, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """An endpoint that knows its caller's principal and turns GatewayErrors into responses."""

    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request, principal_of(request, auth))
        except GatewayError as exc:
            return error_response(exc)

    return endpoint


async def parse_body(request: Request, model: type[M]) -> M:
    raw = b""
    async for chunk in request.stream():  # stop reading as soon as it is too big
        raw += chunk
        if len(raw) > MAX_BODY_BYTES:
            raise TooLarge(f"The body is limited to {MAX_BODY_BYTES} bytes.")
    try:
        data = jsonlimits.loads(raw or b"null")
    except jsonlimits.TooDeep as exc:
        raise Invalid(f"The body is {exc}.") from exc
    except ValueError as exc:
        raise Invalid("The body is not valid JSON.") from exc
    if not isinstance(data, dict):
        raise Invalid("The body must be a JSON object.")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        detail = [
            ValidationDetail(loc=["body", *e["loc"]], msg=e["msg"], type=e["type"])
            for e in exc.errors(include_url=False, include_input=False)
        ]
        summary = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise Invalid(f"Invalid body: {summary}", detail) from exc


def query_limit(request: Request, *, default: int, most: int) -> int:
    """The `limit` query parameter, between 1 and `most`."""
    try:
        return max(1, min(int(request.query_params.get("limit", str(default))), most))
    except ValueError as exc:
        raise Invalid("limit must be a whole number.") from exc


def path_id(request: Request, name: str, pattern: re.Pattern[str] = _ID) -> str:
    value = str(request.path_params[name])
    if not pattern.match(value):
        raise NotFound(f"No {name} {value[:64]!r}.")
    return value


class PageApi:
    """`GET /api/config` (public), and the principal's `GET /api/sessions` (conversations,
    newest first), `GET /api/sessions/{uuid}/history` and `GET /api/outbox` (mail kept unsent
    because no SendGrid key is set; optional query: `limit` 1-200, default 50, and `session`, a
    client uuid, for one conversation's mail)."""

    def __init__(self, bus: Bus, intake: Intake, auth: Auth) -> None:
        self.bus = bus
        self.intake = intake
        self.auth = auth

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


def meta_routes(bus: Bus) -> list[Route]:
    """`/health` (the workflow seed's health check, for its deployment scripts) and the
    OpenAPI document at `/openapi.json`."""

    async def health(_: Request) -> Response:
        up = bus.connected
        body = Health(
            status="healthy" if up else "unhealthy",
            service="sidekick",
            nats="connected" if up else "down",
            workflow_engine="configured" if up else "unconfigured",
        )
        return respond(body, 200 if up else 503)

    document = openapi.document()

    async def spec(_: Request) -> Response:
        return JSONResponse(document)

    return [Route("/health", health), Route("/openapi.json", spec)]


def cors(settings: Settings) -> list[Middleware]:
    """Browsers on the configured origins may call the API (the workflow seed's frontend runs
    on its own origin); none when no origin is configured."""
    origins = [o.strip() for o in settings.cors_origins.split(",") if o.strip()]
    if not origins:
        return []
    return [
        Middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_credentials=True,
            allow_methods=["*"],
            allow_headers=["*"],
            max_age=600,
        )
    ]
