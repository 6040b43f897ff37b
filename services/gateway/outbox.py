"""`GET /api/outbox`: mail kept in the local outbox because no SendGrid key is set. Every
entry is marked NOT SENT. A caller sees only its own principal's mail. Optional query: `limit`
(1-200, default 50), `session` (a client uuid, to see only that conversation's mail)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from services.runtime import outbox
from services.runtime.bus import Bus

ANONYMOUS = "anonymous"
SCAN = 500


def outbox_endpoint(bus: Bus) -> Callable[[Request, str], Awaitable[Response]]:
    """The handler, given the caller's principal (the gateway's auth decides who that is)."""

    async def list_outbox(request: Request, principal: str) -> Response:
        try:
            limit = min(max(int(request.query_params.get("limit", "50")), 1), 200)
        except ValueError:
            return JSONResponse({"error": "limit must be a number"}, status_code=400)
        session = request.query_params.get("session")
        mine = f"{principal}/"

        def shown(session_id: str) -> bool:
            if session:
                return session_id == mine + session
            return session_id.startswith(mine)

        entries = [
            e for e in await outbox.read(bus.js, bus.subjects, limit=SCAN) if shown(e.session_id)
        ][:limit]
        return JSONResponse(
            {
                "note": "Outbox mail was NOT sent: set SENDGRID_API_KEY and SENDGRID_FROM_EMAIL "
                "to send mail.",
                "entries": [e.model_dump(mode="json") for e in entries],
            }
        )

    return list_outbox


def outbox_route(bus: Bus) -> Route:
    """The route without auth: every caller is the anonymous principal."""
    handler = outbox_endpoint(bus)

    async def endpoint(request: Request) -> Response:
        return await handler(request, ANONYMOUS)

    return Route("/api/outbox", endpoint, methods=["GET"])
