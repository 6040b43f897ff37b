"""What the gateway refuses, and why, for both the WebSocket (an error frame with `code`) and
the HTTP API (the status code with `{"error": {"code", "message"}}`).

    GatewayError            code, message, http_status
    ├── Unauthorized        401 unauthorized      no token, or a wrong one
    ├── Invalid             422 invalid_body      the body fails validation (details in `detail`)
    │   └── TooLarge        413 invalid_body      the body is over the size limit
    ├── NotFound            404 not_found         unknown id, or another principal's
    ├── Conflict            409 conflict          e.g. not awaiting clarification, id in use
    ├── Busy                409 busy              `reject`: the session answers another request
    ├── RateLimited         429 rate_limited      per-minute limit or concurrency cap
    └── Unavailable         503 unavailable       the bus did not take the message
"""

from __future__ import annotations

from contracts.frames import ErrorBody, ErrorCode
from contracts.http import ErrorResponse, ValidationDetail


class GatewayError(Exception):
    code: ErrorCode = "request_failed"
    http_status: int = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def body(self) -> ErrorResponse:
        # `detail` as FastAPI's errors have it, for the workflow seed's clients.
        return ErrorResponse(
            error=ErrorBody(code=self.code, message=self.message), detail=self.message
        )


class Unauthorized(GatewayError):
    code: ErrorCode = "unauthorized"
    http_status = 401


class Invalid(GatewayError):
    code: ErrorCode = "invalid_body"
    http_status = 422

    def __init__(self, message: str, detail: list[ValidationDetail] | None = None) -> None:
        super().__init__(message)
        self.detail = detail or []

    def body(self) -> ErrorResponse:
        # FastAPI answers every 422 with a list of {loc, msg, type}.
        detail = self.detail or [
            ValidationDetail(loc=["body"], msg=self.message, type="value_error")
        ]
        return super().body().model_copy(update={"detail": detail})


class TooLarge(Invalid):
    http_status = 413


class NotFound(GatewayError):
    code: ErrorCode = "not_found"
    http_status = 404


class Conflict(GatewayError):
    code: ErrorCode = "conflict"
    http_status = 409


class Busy(GatewayError):
    code: ErrorCode = "busy"
    http_status = 409


class RateLimited(GatewayError):
    code: ErrorCode = "rate_limited"
    http_status = 429

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Unavailable(GatewayError):
    code: ErrorCode = "unavailable"
    http_status = 503
