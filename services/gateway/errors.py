"""The gateway's errors now live in `services/gateway/core/errors.py`; this name is kept only for
`spend.py` and `approving.py`, which import it and move to their own homes next."""

from services.gateway.core.errors import (
    Busy,
    Conflict,
    GatewayError,
    Invalid,
    NotFound,
    RateLimited,
    TooLarge,
    Unauthorized,
    Unavailable,
)

__all__ = [
    "Busy",
    "Conflict",
    "GatewayError",
    "Invalid",
    "NotFound",
    "RateLimited",
    "TooLarge",
    "Unauthorized",
    "Unavailable",
]
