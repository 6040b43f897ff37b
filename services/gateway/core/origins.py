"""Which pages may drive the gateway, and under which names: a wall against cross-site
WebSocket hijacking and DNS rebinding, with auth on or off.

- `Host`: the gateway answers only names it serves: an IP literal (its bind address, or any
  address a client reached it by: a name is what rebinding needs), `localhost`, and the names
  listed in SIDEKICK_ALLOWED_HOSTS (`*`: any). A page on `evil.example` whose name was
  rebound to 127.0.0.1 sends `Host: evil.example` and is refused.
- `Origin`: a WebSocket, and every HTTP request that is not GET, HEAD or OPTIONS, is taken
  only from the gateway's own origin (scheme and the `Host` it was reached by) or one listed
  in SIDEKICK_CORS_ORIGINS. Clients that send no `Origin` (programs, not browsers: the seeds'
  Python clients, `sidekick chat`, curl) are not browsers driven by a page and pass.

A refusal is 403 with the usual error body (`forbidden`), and one log line per interval.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket

from contracts.frames import ErrorBody
from contracts.http import ErrorResponse
from services.runtime.base.quietlog import Summarised
from services.runtime.base.settings import Settings

log = logging.getLogger("sidekick.gateway")

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
CLOSE_FORBIDDEN = 4403
LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})
DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def split_list(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def _split(netloc: str, scheme: str) -> tuple[str, int] | None:
    """(name, port) of `host[:port]`, the scheme's default port filled in; None for junk."""
    try:
        parts = urlsplit(f"//{netloc.strip().lower()}")
        port = parts.port or DEFAULT_PORTS.get(scheme, 80)
    except ValueError:
        return None
    if not parts.hostname:
        return None
    # One machine's loopback names are one place: its page at localhost talks to 127.0.0.1.
    return ("localhost" if parts.hostname in LOOPBACK else parts.hostname), port


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _origin_key(origin: str) -> tuple[str, int] | None:
    """(name, port) of an origin; None for `null` or junk."""
    parts = urlsplit(origin.strip().lower())
    if parts.scheme not in DEFAULT_PORTS or parts.path or parts.query:
        return None
    return _split(parts.netloc, parts.scheme)


class OriginPolicy:
    def __init__(self, allowed_hosts: list[str], origins: list[str]) -> None:
        self.any_host = "*" in allowed_hosts
        self.hosts = {h.lower() for h in allowed_hosts if h != "*"} | {"localhost"}
        self.origins = {key for key in map(_origin_key, origins) if key is not None}
        self.refusals = Summarised(log, "refused requests (Origin/Host)")

    @classmethod
    def from_settings(cls, settings: Settings) -> OriginPolicy:
        hosts = split_list(settings.allowed_hosts)
        return cls([*hosts, settings.gateway_host.strip("[]")], split_list(settings.cors_origins))

    def host_ok(self, host: str | None) -> bool:
        if host is None or self.any_host:
            return True  # HTTP/1.0 without a Host: no browser sends that
        split = _split(host, "http")
        return split is not None and (split[0] in self.hosts or _is_ip(split[0]))

    def origin_ok(self, origin: str | None, host: str | None, scheme: str) -> bool:
        if origin is None:
            return True
        key = _origin_key(origin)
        if key is None:
            return False  # `null` (sandboxed frames, file:) or not an origin at all
        if key in self.origins:
            return True
        # Its own origin: the page came from the name it now talks to (behind a TLS proxy the
        # page's scheme is https while this server sees http; the port tells them apart).
        return host is not None and key in (
            _split(host, scheme),
            _split(host, "https" if scheme in ("http", "ws") else "http"),
        )

    def refusal(self, scope: Scope) -> str | None:
        """Why this request is refused, or None."""
        headers = Headers(scope=scope)
        host = headers.get("host")
        if not self.host_ok(host):
            return f"Host {host[:100]!r} is not a name this gateway serves"  # type: ignore[index]
        if scope["type"] == "http" and scope.get("method", "GET") in SAFE_METHODS:
            return None
        origin = headers.get("origin")
        if not self.origin_ok(origin, host, scope.get("scheme", "http")):
            return f"Origin {str(origin)[:100]!r} may not use this gateway"
        return None

    def refuse(self, why: str, scope: Scope) -> ErrorResponse:
        kind = "WebSocket" if scope["type"] == "websocket" else str(scope.get("method"))
        # By kind, not by value: a client varying its Origin still gets one line an interval.
        what = f"{kind} refusals ({why.split(' ', 1)[0]})"
        self.refusals.say(what, "refused a %s %s: %s", kind, scope.get("path", ""), why)
        message = (
            f"{why}. Set SIDEKICK_CORS_ORIGINS (origins) or SIDEKICK_ALLOWED_HOSTS (names) "
            "to allow it."
        )
        return ErrorResponse(error=ErrorBody(code="forbidden", message=message), detail=message)

    def middleware(self, app: ASGIApp) -> ASGIApp:
        """The HTTP routes behind this policy (Starlette's `Middleware(policy.middleware)`)."""

        async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] in ("http", "websocket"):
                why = self.refusal(scope)
                if why is not None:
                    body = self.refuse(why, scope)
                    if scope["type"] == "http":
                        await JSONResponse(body.wire(), 403)(scope, receive, send)
                        return
                    await WebSocket(scope, receive, send).close(CLOSE_FORBIDDEN)
                    return
            await app(scope, receive, send)

        return guarded

    def socket(
        self, endpoint: Callable[[WebSocket], Awaitable[None]]
    ) -> Callable[[WebSocket], Awaitable[None]]:
        """A WebSocket endpoint behind this policy: the handshake refused with 403."""

        async def guarded(ws: WebSocket) -> None:
            why = self.refusal(ws.scope)
            if why is None:
                await endpoint(ws)
                return
            body = self.refuse(why, ws.scope)
            if "websocket.http.response" in ws.scope.get("extensions", {}):
                await ws.send_denial_response(JSONResponse(body.wire(), status_code=403))
            else:
                await ws.close(code=CLOSE_FORBIDDEN)

        return guarded
