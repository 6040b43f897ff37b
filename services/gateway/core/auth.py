"""Bearer tokens and principals.

With `SIDEKICK_AUTH_TOKENS` ("token1:alice,token2:bob") or `SIDEKICK_AUTH_TOKENS_FILE` (one
`token:principal` per line, `#` comments) set, every WebSocket and HTTP API call must present
a token; the token's principal owns the sessions and requests it creates. With neither set,
auth is off and everyone is the principal `anonymous` — allowed only on a loopback address
unless `SIDEKICK_ALLOW_UNAUTHENTICATED=true` says otherwise.

Tokens are compared in constant time and never logged.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from starlette.requests import HTTPConnection

from services.gateway.core.errors import AuthConfigError
from services.runtime.base.settings import Settings

log = logging.getLogger("sidekick.gateway")

ANONYMOUS = "anonymous"
# A principal prefixes session ids as "principal/uuid", so it may not contain "/".
PRINCIPAL = re.compile(r"^[A-Za-z0-9_.@\-]{1,64}$")
MIN_TOKEN_CHARS = 8


def parse_tokens(entries: Iterable[str], origin: str) -> dict[str, str]:
    """`token:principal` entries to {token: principal}. The principal follows the last ':'."""
    tokens: dict[str, str] = {}
    for n, raw in enumerate(entries, 1):
        entry = raw.strip()
        if not entry or entry.startswith("#"):
            continue
        token, sep, principal = entry.rpartition(":")
        token, principal = token.strip(), principal.strip()
        where = f"{origin} entry {n}"
        if not sep or not token:
            raise AuthConfigError(f"{where}: expected 'token:principal'")
        if len(token) < MIN_TOKEN_CHARS:
            raise AuthConfigError(f"{where}: tokens must be at least {MIN_TOKEN_CHARS} chars")
        if not PRINCIPAL.match(principal):
            raise AuthConfigError(
                f"{where}: principal {principal!r} must match {PRINCIPAL.pattern} (no '/')"
            )
        if principal == ANONYMOUS:
            raise AuthConfigError(f"{where}: '{ANONYMOUS}' is reserved for auth-off mode")
        tokens[token] = principal
    return tokens


def load_tokens(settings: Settings) -> dict[str, str]:
    tokens: dict[str, str] = {}
    if settings.auth_tokens is not None:
        tokens.update(
            parse_tokens(settings.auth_tokens.get_secret_value().split(","), "SIDEKICK_AUTH_TOKENS")
        )
    if settings.auth_tokens_file is not None:
        path = Path(settings.auth_tokens_file)
        try:
            lines = path.read_text().splitlines()
        except OSError as exc:
            raise AuthConfigError(f"cannot read SIDEKICK_AUTH_TOKENS_FILE {path}: {exc}") from exc
        tokens.update(parse_tokens(lines, str(path)))
    return tokens


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass
class Auth:
    """Who a token belongs to. `required` is False when no tokens are configured."""

    tokens: dict[str, str] = field(default_factory=dict)

    @property
    def required(self) -> bool:
        return bool(self.tokens)

    @classmethod
    def from_settings(cls, settings: Settings) -> Auth:
        auth = cls(load_tokens(settings))
        if auth.required:
            principals = sorted(set(auth.tokens.values()))
            log.info("auth is on: %d token(s) for %s", len(auth.tokens), ", ".join(principals))
        elif not is_loopback(settings.gateway_host) and not settings.allow_unauthenticated:
            raise AuthConfigError(
                f"refusing to serve {settings.gateway_host} without auth: set "
                "SIDEKICK_AUTH_TOKENS (or SIDEKICK_AUTH_TOKENS_FILE), bind 127.0.0.1, or set "
                "SIDEKICK_ALLOW_UNAUTHENTICATED=true if something in front already authenticates"
            )
        else:
            log.warning(
                "auth is OFF: no SIDEKICK_AUTH_TOKENS set; every client is '%s' (listening on %s)",
                ANONYMOUS,
                settings.gateway_host,
            )
        return auth

    def principal(self, token: str | None) -> str | None:
        """The token's principal; `anonymous` when auth is off; None for a bad token."""
        if not self.required:
            return ANONYMOUS
        if not token:
            return None
        found: str | None = None
        for known, principal in self.tokens.items():
            # Check every token, so the time taken says nothing about which one was close.
            if hmac.compare_digest(known.encode(), token.encode()):
                found = principal
        return found

    def from_header(self, conn: HTTPConnection) -> tuple[bool, str | None]:
        """(header present, principal or None) from `Authorization: Bearer <token>`."""
        header = conn.headers.get("authorization")
        if header is None:
            return False, (None if self.required else ANONYMOUS)
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer":
            return True, None
        return True, self.principal(token.strip())
