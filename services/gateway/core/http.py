"""Plumbing every HTTP surface shares: who is asking (`principal_of`, `guarded`), bodies read
within the size and nesting limits (`parse_body`), path and query values, a refusal as the
response its status and body say (`error_response`); plus the service's own routes, `/health`
and `/openapi.json`, and the CORS middleware."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import TypeVar

from pydantic import BaseModel, ValidationError
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from contracts import openapi
from contracts.frames import ID_PATTERN, REQUEST_ID_PATTERN
from contracts.http import Health, HttpBody, ValidationDetail, WorkflowList
from services.gateway.core.auth import Auth
from services.gateway.core.errors import (
    GatewayError,
    Invalid,
    NotFound,
    RateLimited,
    TooLarge,
    Unauthorized,
)
from services.runtime.base.settings import Settings
from services.runtime.bus.core import Bus
from services.runtime.walls import jsonlimits

M = TypeVar("M", bound=BaseModel)
Handler = Callable[[Request, str], Awaitable[Response]]

MAX_BODY_BYTES = 256 * 1024
ID = re.compile(ID_PATTERN)
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


def path_id(request: Request, name: str, pattern: re.Pattern[str] = ID) -> str:
    value = str(request.path_params[name])
    if not pattern.match(value):
        raise NotFound(f"No {name} {value[:64]!r}.")
    return value


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
