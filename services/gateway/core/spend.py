"""The gateway's budget refusal, for every surface (they all submit through the intake): the
accounts' answer (services/runtime/budgets/admission.py) as the gateway's errors."""

from __future__ import annotations

from services.gateway.core.errors import RateLimited, Unavailable
from services.runtime.budgets.admission import AccountsUnavailable, refusal
from services.runtime.bus.core import Bus


async def refuse_if_spent(bus: Bus, principal: str, session_id: str = "") -> None:
    try:
        refused = await refusal(bus.kv.budgets, bus.settings, principal, session_id)
    except AccountsUnavailable as exc:
        raise Unavailable("The budget store is unavailable; please retry.") from exc
    if refused is not None:
        raise RateLimited(refused.message, refused.retry_after)
