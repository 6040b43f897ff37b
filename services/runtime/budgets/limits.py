"""The limits: what one request may spend (tokens, model calls, tool calls, money, wall time),
what one principal may spend in a UTC day and one session in all (tokens, money), each from the
settings (SIDEKICK_BUDGET_*); and `Limit`, the one a spend reached, which every refusal names."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from contracts import Usage
from contracts.base import TaskBudget
from services.runtime.base.settings import Settings
from services.runtime.budgets.accounts import Day
from services.runtime.budgets.prices import Table, cost

Scope = Literal["daily", "session"]


@dataclass(frozen=True)
class Limit:
    """One limit that a spend reached: what, how much was allowed, how much was spent."""

    what: str
    allowed: float
    spent: float
    needed: float = 0  # what the next step could take, counted in advance

    def note(self) -> str:
        spend = f"{self.spent:g} of {self.allowed:g}"
        if self.needed:
            spend += f" used or held, and its next model call could take {self.needed:g} more"
        return f"Note: this request stopped at its {self.what} budget ({spend})."


def request_limit(
    settings: Settings,
    usage: Usage,
    seconds: float,
    table: Table,
    ahead: tuple[int, float] = (0, 0.0),
) -> Limit | None:
    """The first of the request's limits that its spend, with the next model call's maximum
    (`ahead`: tokens and USD) counted in advance, would pass, if any."""
    tokens, usd = usage.input_tokens + usage.output_tokens, cost(usage, table)
    if ahead[0] and tokens + ahead[0] > settings.budget_request_tokens:
        return Limit("tokens", settings.budget_request_tokens, tokens, ahead[0])
    if ahead[1] and usd + ahead[1] > settings.budget_request_usd:
        return Limit("money (USD)", settings.budget_request_usd, usd, round(ahead[1], 6))
    checks = (
        ("tokens", settings.budget_request_tokens, tokens),
        ("model calls", settings.budget_request_calls, usage.calls),
        ("money (USD)", settings.budget_request_usd, usd),
        ("wall time (s)", settings.budget_request_seconds, round(seconds, 1)),
    )
    for what, allowed, spent in checks:
        if spent >= allowed:
            return Limit(what, allowed, spent)
    return None


def limits_of(settings: Settings, scope: Scope) -> tuple[int, float]:
    """The tokens and money a principal's day, or a session, may take."""
    if scope == "daily":
        return settings.budget_daily_tokens, settings.budget_daily_usd
    return settings.budget_session_tokens, settings.budget_session_usd


def day_limit(settings: Settings, day: Day, scope: Scope = "daily") -> Limit | None:
    """The limit a day's (or a session's) spend and live holds have reached, if any."""
    tokens, usd = day.committed(time.time())
    allowed_tokens, allowed_usd = limits_of(settings, scope)
    checks = (
        (f"{scope} tokens", allowed_tokens, tokens),
        (f"{scope} money (USD)", allowed_usd, usd),
    )
    for what, allowed, spent in checks:
        if spent >= allowed:
            return Limit(what, allowed, spent)
    return None


def allowance(settings: Settings, used: Usage, granted: int | None) -> TaskBudget:
    """What a request may still spend on a step sent elsewhere (a worker, an evaluation): its
    limits less its usage, and no more tokens than the step was `granted` when it was held."""
    tokens = settings.budget_request_tokens - used.input_tokens - used.output_tokens
    if granted is not None:
        tokens = min(tokens, granted)
    return TaskBudget(
        tokens=max(tokens, 0),
        calls=max(settings.budget_request_calls - used.calls, 0),
        tool_calls=max(settings.budget_request_tool_calls - used.tool_calls, 0),
    )
