"""A principal whose day's budget is spent gets a clear refusal for each new request, on every
surface (they all submit through the intake), until the UTC day turns."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from services.gateway.errors import RateLimited, Unavailable
from services.runtime.bus.core import Bus
from services.runtime.requests.budgets import Days, day_limit


async def refuse_if_spent(bus: Bus, principal: str) -> None:
    try:
        day = await Days(bus.kv.budgets).load(principal)
    except Exception as exc:
        raise Unavailable("The budget store is unavailable; please retry.") from exc
    limit = day_limit(bus.settings, day)
    if limit is None:
        return
    now = datetime.now(UTC)
    midnight = (now + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    wait = int((midnight - now).total_seconds()) + 1
    raise RateLimited(
        f"Today's budget for {principal} is spent ({limit.what}: {limit.spent:g} of "
        f"{limit.allowed:g}); it resets at 00:00 UTC, in {wait // 3600}h {wait % 3600 // 60}m.",
        wait,
    )
