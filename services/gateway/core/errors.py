"""What the gateway refuses, and why, for every surface: the WebSocket (an error frame with
`code`), the HTTP APIs (the status code with `{"error": {"code", "message"}}`), and the
protocols that say it their own way (`/v1`'s OpenAI errors, A2A's JSON-RPC codes).

    SidekickError (services/runtime/base/errors.py)
    ├── ConfigurationError
    │   └── AuthConfigError     the token configuration cannot be used: the gateway won't start
    ├── GatewayError            code, message, http_status
    │   ├── Unauthorized        401 unauthorized    no token, or a wrong one
    │   ├── Invalid             422 invalid_body    the body fails validation (details: `detail`)
    │   │   └── TooLarge        413 invalid_body    the body is over the size limit
    │   ├── NotFound            404 not_found       unknown id, or another principal's
    │   ├── Conflict            409 conflict        e.g. not awaiting clarification, id in use
    │   │   └── Expired         409 conflict        core/approving.py: a decision after the
    │   │                                           approval expired (the request goes on)
    │   ├── Busy                409 busy            `reject`: the session answers another request
    │   ├── RateLimited         429 rate_limited    per-minute limit, concurrency cap or budget
    │   └── Unavailable         503 unavailable     the bus did not take the message
    └── RpcError                an A2A JSON-RPC error: its code and message (a2a/service.py)
"""

from __future__ import annotations

from typing import Any

from contracts.frames import ErrorBody, ErrorCode
from contracts.http import ErrorResponse, ValidationDetail
from services.runtime.base.errors import ConfigurationError, SidekickError


class AuthConfigError(ConfigurationError, ValueError):
    """The token configuration cannot be used; the message says which entry and why."""


class GatewayError(SidekickError):
    """A refusal; each kind names its `code` and `http_status` where it is declared."""

    code: ErrorCode = "request_failed"
    http_status: int = 400

    def __init_subclass__(
        cls, *, code: ErrorCode | None = None, http_status: int | None = None, **kwargs: Any
    ) -> None:
        super().__init_subclass__(**kwargs)
        if code is not None:
            cls.code = code
        if http_status is not None:
            cls.http_status = http_status

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def body(self) -> ErrorResponse:
        # `detail` as FastAPI's errors have it, for the workflow seed's clients.
        return ErrorResponse(
            error=ErrorBody(code=self.code, message=self.message), detail=self.message
        )


class Unauthorized(GatewayError, code="unauthorized", http_status=401):
    """No token, or a wrong one."""


class Invalid(GatewayError, code="invalid_body", http_status=422):
    """The body fails validation; `detail` says where."""

    def __init__(self, message: str, detail: list[ValidationDetail] | None = None) -> None:
        super().__init__(message)
        self.detail = detail or []

    def body(self) -> ErrorResponse:
        # FastAPI answers every 422 with a list of {loc, msg, type}.
        detail = self.detail or [
            ValidationDetail(loc=["body"], msg=self.message, type="value_error")
        ]
        return super().body().model_copy(update={"detail": detail})


class TooLarge(Invalid, http_status=413):
    """The body is over the size limit."""


class NotFound(GatewayError, code="not_found", http_status=404):
    """An unknown id, or another principal's."""


class Conflict(GatewayError, code="conflict", http_status=409):
    """Not in a state that allows it (e.g. not awaiting clarification), or an id in use."""


class Busy(GatewayError, code="busy", http_status=409):
    """`reject`: the session answers another request (`active`, when known)."""

    def __init__(self, message: str, active: str | None = None) -> None:
        super().__init__(message)
        self.active = active


class RateLimited(GatewayError, code="rate_limited", http_status=429):
    """Over the per-minute limit or the concurrency cap; `retry_after` seconds."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Unavailable(GatewayError, code="unavailable", http_status=503):
    """The bus did not take the message."""
