"""`GET /api/outbox`: mail kept in the local outbox because no SendGrid key is set. Every
entry is marked NOT SENT. Optional query: `limit` (1-200, default 50), `session` (the client's
uuid, to see only that conversation's mail)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from services.runtime import outbox
from services.runtime.bus import Bus


def outbox_route(bus: Bus) -> Route:
    async def list_outbox(request: Request) -> Response:
        try:
            limit = min(max(int(request.query_params.get("limit", "50")), 1), 200)
        except ValueError:
            return JSONResponse({"error": "limit must be a number"}, status_code=400)
        session = request.query_params.get("session")
        entries = await outbox.read(bus.js, bus.subjects, limit=200 if session else limit)
        if session:
            entries = [e for e in entries if e.session_id.split("/", 1)[-1] == session][:limit]
        return JSONResponse(
            {
                "note": "Outbox mail was NOT sent: set SENDGRID_API_KEY and SENDGRID_FROM_EMAIL "
                "to send mail.",
                "entries": [e.model_dump(mode="json") for e in entries],
            }
        )

    return Route("/api/outbox", list_outbox, methods=["GET"])
