"""Whether a new request may start: a principal whose day's budget is spent (or held by its
requests in flight) is refused each new request, on every surface, until the UTC day turns; a
session whose budget is spent, each new request in it. The refusal says which, in words, and
how long to wait.

`Admission` is the gateway's: it reads the day and the session for each new request, except for
a principal busy at this gateway (leases.HOT_STEPS requests within leases.HOT_WINDOW seconds),
whose day and sessions it reads at most once every `SIDEKICK_BUDGET_ADMISSION_SECONDS`. So a day
or a session spent meanwhile is refused here up to that many seconds late; a request let in
during that time is refused at its first step, whose hold finds no room (`budget_exhausted`),
so the refusal's lag never lets a day or a session spend more."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from nats.js.kv import KeyValue

from services.runtime.base.errors import SidekickError
from services.runtime.base.settings import Settings
from services.runtime.budgets.accounts import Day, Days, day_key, session_key
from services.runtime.budgets.leases import HOT_STEPS, HOT_WINDOW, MAX_RECENT
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
    return decide(settings, principal, day, session)


class Admission:
    """The gateway's admission: `refusal`, with a busy principal's day and sessions read at most
    once every `SIDEKICK_BUDGET_ADMISSION_SECONDS` (the module says what that costs)."""

    def __init__(self, bucket: Callable[[], KeyValue], settings: Settings) -> None:
        self.bucket = bucket
        self.settings = settings
        self._read: dict[str, tuple[float, Day]] = {}  # key: when it was read, what it said
        self._recent: dict[str, deque[float]] = {}

    def _busy(self, principal: str, now: float) -> bool:
        seen = self._recent.get(principal)
        if seen is None:
            if len(self._recent) >= MAX_RECENT:
                since = now - HOT_WINDOW
                self._recent = {p: s for p, s in self._recent.items() if s and s[-1] > since}
            seen = self._recent[principal] = deque()
        while seen and seen[0] < now - HOT_WINDOW:
            seen.popleft()
        seen.append(now)
        return len(seen) > HOT_STEPS

    async def _load(self, key: str, reuse: bool, now: float) -> Day:
        if reuse:
            found = self._read.get(key)
            if found is not None and now - found[0] < self.settings.budget_admission_seconds:
                return found[1]
        day = await Days(self.bucket()).load("", key)
        if reuse:
            if len(self._read) >= MAX_RECENT:
                keep = self.settings.budget_admission_seconds
                self._read = {k: v for k, v in self._read.items() if now - v[0] < keep}
            self._read[key] = (now, day)
        return day

    async def refusal(self, principal: str, session_id: str = "") -> Refusal | None:
        """Why a new request of `principal` in `session_id` may not start, or None when it
        may; AccountsUnavailable when the accounts cannot be read."""
        now = time.monotonic()
        reuse = self.settings.budget_admission_seconds > 0 and self._busy(principal, now)
        try:
            day, session = await asyncio.gather(
                self._load(day_key(principal), reuse, now),
                self._load(session_key(principal, session_id), reuse, now),
            )
        except Exception as exc:
            raise AccountsUnavailable(repr(exc)) from exc
        return decide(self.settings, principal, day, session)


def decide(settings: Settings, principal: str, day: Day, session: Day) -> Refusal | None:
    """The refusal a day's and a session's records call for, if any."""
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
