"""A principal whose day's budget is spent (or held by its requests in flight) gets a clear
refusal for each new request, on every surface (they all submit through the intake), until the
UTC day turns; a session whose budget is spent, for each new request in it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from services.gateway.errors import RateLimited, Unavailable
from services.runtime.bus.core import Bus
from services.runtime.requests.budgets import Days, day_limit, session_key


async def refuse_if_spent(bus: Bus, principal: str, session_id: str = "") -> None:
    days = Days(bus.kv.budgets)
    try:
        day = await days.load(principal)
        session = await days.load(principal, session_key(principal, session_id))
    except Exception as exc:
        raise Unavailable("The budget store is unavailable; please retry.") from exc
    spent = day_limit(bus.settings, session, "session")
    if spent is not None:
        raise RateLimited(
            f"This session's budget is spent ({spent.what}: {spent.spent:g} of "
            f"{spent.allowed:g}); start a new session to go on.",
            3600,
        )
    limit = day_limit(bus.settings, day)
    if limit is None:
        return
    now = datetime.now(UTC)
    midnight = (now + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    wait = int((midnight - now).total_seconds()) + 1
    live = any(h.until > now.timestamp() for h in day.held.values())
    held = " spent or held by requests in flight" if live else ""
    raise RateLimited(
        f"Today's budget for {principal} is{held or ' spent'} ({limit.what}: {limit.spent:g} of "
        f"{limit.allowed:g}); it resets at 00:00 UTC, in {wait // 3600}h {wait % 3600 // 60}m.",
        wait,
    )
