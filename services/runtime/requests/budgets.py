"""Budgets: what one request may spend, and what one principal may spend in a UTC day.

A request's spend is its model usage so far (tokens in and out, model calls, per model) plus its
wall time; money is the usage priced by `PRICES` (per million tokens), overridable with
`SIDEKICK_PRICES`. The orchestrator checks the request's and the principal's budget before it
dispatches each attempt and each evaluation; the gateway refuses a new request of a principal
whose day is spent. A principal's day is one key in the `budgets` bucket, added to by
compare-and-set once per request (the request ids counted are kept in the value, so a
redelivered end, or a second replica, never counts a request twice).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from nats.js.kv import KeyValue
from pydantic import Field

from contracts import Model, Usage
from services.runtime.base.settings import Settings
from services.runtime.bus.kvstore import get_model, key_for, write_if

# USD per million tokens (input, output): OpenAI's published list prices for these models as of
# 2025 (the price source); a model not listed costs nothing here until SIDEKICK_PRICES names it.
PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
}
PRICE_SOURCE = "OpenAI list prices (2025), per million tokens; SIDEKICK_PRICES overrides"
REMEMBERED = 5000  # request ids kept per principal-day against double counting


def prices(overrides: str) -> dict[str, tuple[float, float]]:
    """The price table with `model=input:output` pairs (';'-separated) laid over it."""
    table = dict(PRICES)
    for part in filter(None, (p.strip() for p in overrides.split(";"))):
        model, _, pair = part.partition("=")
        given, _, taken = pair.partition(":")
        try:
            table[model.strip()] = (float(given), float(taken))
        except ValueError as exc:
            raise ValueError(f"SIDEKICK_PRICES: {part!r} is not 'model=input:output'") from exc
    return table


def cost(usage: Usage, table: dict[str, tuple[float, float]]) -> float:
    total = 0.0
    for model, used in usage.models.items():
        given, taken = table.get(model, (0.0, 0.0))
        total += (used.input_tokens * given + used.output_tokens * taken) / 1_000_000
    return round(total, 6)


@dataclass(frozen=True)
class Limit:
    """One limit that a spend reached: what, how much was allowed, how much was spent."""

    what: str
    allowed: float
    spent: float

    def note(self) -> str:
        spend = f"{self.spent:g} of {self.allowed:g}"
        return f"Note: this request stopped at its {self.what} budget ({spend})."


def request_limit(
    settings: Settings, usage: Usage, seconds: float, table: dict[str, tuple[float, float]]
) -> Limit | None:
    """The first of the request's limits its spend has reached, if any."""
    checks = (
        ("tokens", settings.budget_request_tokens, usage.input_tokens + usage.output_tokens),
        ("model calls", settings.budget_request_calls, usage.calls),
        ("money (USD)", settings.budget_request_usd, cost(usage, table)),
        ("wall time (s)", settings.budget_request_seconds, round(seconds, 1)),
    )
    for what, allowed, spent in checks:
        if spent >= allowed:
            return Limit(what, allowed, spent)
    return None


class Day(Model):
    """One principal's spend in one UTC day (key: hash of the principal, and the day)."""

    input_tokens: int = Field(default=0, ge=0, description="Prompt tokens.")
    output_tokens: int = Field(default=0, ge=0, description="Completion tokens.")
    calls: int = Field(default=0, ge=0, description="Model calls.")
    usd: float = Field(default=0.0, ge=0, description="Money, by the price table.")
    counted: list[str] = Field(default_factory=list, description="Request ids counted.")


def day_key(principal: str, now: datetime | None = None) -> str:
    day = (now or datetime.now(UTC)).strftime("%Y%m%d")
    return f"{key_for(principal)}.{day}"


def day_limit(settings: Settings, day: Day) -> Limit | None:
    checks = (
        ("daily tokens", settings.budget_daily_tokens, day.input_tokens + day.output_tokens),
        ("daily money (USD)", settings.budget_daily_usd, round(day.usd, 6)),
    )
    for what, allowed, spent in checks:
        if spent >= allowed:
            return Limit(what, allowed, spent)
    return None


class Days:
    def __init__(self, kv: KeyValue) -> None:
        self.kv = kv

    async def load(self, principal: str) -> Day:
        found, _ = await get_model(self.kv, day_key(principal), Day)
        return found or Day()

    async def charge(
        self, principal: str, request_id: str, usage: Usage, usd: float
    ) -> tuple[Day, bool]:
        """Add one request's spend to its principal's day, once; whether this call added it."""
        key = day_key(principal)
        for _ in range(50):
            found, revision = await get_model(self.kv, key, Day)
            day = found or Day()
            if request_id in day.counted:
                return day, False
            added = Day(
                input_tokens=day.input_tokens + usage.input_tokens,
                output_tokens=day.output_tokens + usage.output_tokens,
                calls=day.calls + usage.calls,
                usd=round(day.usd + usd, 6),
                counted=[*day.counted, request_id][-REMEMBERED:],
            )
            if await write_if(self.kv, key, added, revision) is not None:
                return added, True
        raise RuntimeError(f"could not count the spend of {request_id} (contention)")
