"""Whether a new request may start: a principal whose day's budget is spent (or held by its
requests in flight) is refused each new request, on every surface, until the UTC day turns; a
session whose budget is spent, each new request in it. The refusal says which, in words, and
how long to wait."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from nats.js.kv import KeyValue

from services.runtime.base.errors import SidekickError
from services.runtime.base.settings import Settings
from services.runtime.budgets.accounts import Days, session_key
from services.runtime.budgets.limits import day_limit


class AccountsUnavailable(SidekickError):
    """The `budgets` bucket could not be read; nothing was decided."""


@dataclass(frozen=True)
class Refusal:
    message: str
    retry_after: int  # seconds


async def refusal(
    kv: KeyValue, settings: Settings, principal: str, session_id: str = ""
) -> Refusal | None:
    """Why a new request of `principal` in `session_id` may not start, or None when it may;
    AccountsUnavailable when the accounts cannot be read."""
    days = Days(kv)
    try:
        day = await days.load(principal)
        session = await days.load(principal, session_key(principal, session_id))
    except Exception as exc:
        raise AccountsUnavailable(repr(exc)) from exc
    spent = day_limit(settings, session, "session")
    if spent is not None:
        return Refusal(
            f"This session's budget is spent ({spent.what}: {spent.spent:g} of "
            f"{spent.allowed:g}); start a new session to go on.",
            3600,
        )
    limit = day_limit(settings, day)
    if limit is None:
        return None
    now = datetime.now(UTC)
    midnight = (now + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    wait = int((midnight - now).total_seconds()) + 1
    live = any(h.until > now.timestamp() for h in day.held.values())
    held = " spent or held by requests in flight" if live else ""
    return Refusal(
        f"Today's budget for {principal} is{held or ' spent'} ({limit.what}: {limit.spent:g} of "
        f"{limit.allowed:g}); it resets at 00:00 UTC, in {wait // 3600}h {wait % 3600 // 60}m.",
        wait,
    )
