"""The gateway's budget refusal, for every surface (they all submit through the intake): the
accounts' answer (services/runtime/budgets/admission.py, which reads a busy principal's day and
sessions at most once every SIDEKICK_BUDGET_ADMISSION_SECONDS) as the gateway's errors."""

from __future__ import annotations

import weakref

from services.gateway.core.errors import RateLimited, Unavailable
from services.runtime.budgets.admission import AccountsUnavailable, Admission
from services.runtime.bus.core import Bus

_ADMISSIONS: weakref.WeakKeyDictionary[Bus, Admission] = weakref.WeakKeyDictionary()


def admission(bus: Bus) -> Admission:
    """The gateway's one admission (per bus: one per gateway process)."""
    found = _ADMISSIONS.get(bus)
    if found is None:
        found = _ADMISSIONS[bus] = Admission(lambda: bus.kv.budgets, bus.settings)
    return found


async def refuse_if_spent(bus: Bus, principal: str, session_id: str = "") -> None:
    try:
        refused = await admission(bus).refusal(principal, session_id)
    except AccountsUnavailable as exc:
        raise Unavailable("The budget store is unavailable; please retry.") from exc
    if refused is not None:
        raise RateLimited(refused.message, refused.retry_after)
