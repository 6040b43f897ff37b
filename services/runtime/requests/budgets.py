"""Budgets: what one request may spend, and what one principal may spend in a UTC day.

A request's spend is its model usage so far (tokens in and out, model calls, per model) plus its
wall time; money is the usage priced by `PRICES` (per million tokens), overridable with
`SIDEKICK_PRICES`. The orchestrator checks the request's and the principal's budget before it
dispatches each attempt and each evaluation, the frontline before its one call
(services/frontline/spending.py); the gateway refuses a new request of a principal
whose day is spent. A principal's day is one key in the `budgets` bucket, added to by
compare-and-set once per request (the request ids counted are kept in the value, so a
redelivered end, or a second replica, never counts a request twice). A session's spend is kept
the same way under its own key. Before each model step a request holds what the step may take
against its day and its session (holds.py), and the hold is settled when it is counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from nats.js.kv import KeyValue
from pydantic import Field

from contracts import Model, Usage
from services.runtime.base.settings import Settings
from services.runtime.bus.kvstore import get_model, key_for, write_if
from services.runtime.llm import calls
from services.runtime.llm.calls import reply_limit as reply_limit  # where callers find it

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
Scope = Literal["daily", "session"]
CAS_TRIES = 200  # compare-and-set tries on one key before giving up (many requests, one day)


class KeyLocks:
    """One lock per key, so that the writers of one key in this process take turns instead of
    colliding (compare-and-set still decides between processes); a key's lock is dropped when
    no one holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def turn(self, key: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)


TURNS = KeyLocks()


async def backoff(attempt: int) -> None:
    """A short random wait before compare-and-set try `attempt`, so that writers of one key
    spread out rather than collide again."""
    await asyncio.sleep(random.uniform(0, 0.001 * min(attempt, 20)))


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
    table: dict[str, tuple[float, float]],
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


def prompt_estimate(messages: Any, tools: Any = None) -> int:
    """A call's prompt in tokens, estimated as a server's missing usage is counted (about four
    characters a token), its tool definitions included."""
    return calls.prompt_estimate(messages, {"tools": tools} if tools else None)


class Hold(Model):
    """What one request in flight may have spent by the end of its current step: its usage so
    far plus the step's maximum. It lapses at `until` (a request that died holds nothing)."""

    tokens: int = Field(ge=0, description="Tokens (in + out).")
    usd: float = Field(ge=0, description="Money, by the price table.")
    step: str = Field(description="The step it was taken for, e.g. 'task:1'.")
    until: float = Field(description="Epoch seconds after which it no longer counts.")


class Day(Model):
    """One principal's spend in one UTC day (key: hash of the principal, and the day), or one
    session's (key: `session_key`)."""

    input_tokens: int = Field(default=0, ge=0, description="Prompt tokens.")
    output_tokens: int = Field(default=0, ge=0, description="Completion tokens.")
    calls: int = Field(default=0, ge=0, description="Model calls.")
    usd: float = Field(default=0.0, ge=0, description="Money, by the price table.")
    counted: list[str] = Field(default_factory=list, description="Request ids counted.")
    held: dict[str, Hold] = Field(
        default_factory=dict, description="Holds of requests in flight, by request id."
    )

    def committed(self, now: float, besides: str = "") -> tuple[int, float]:
        """Tokens and money spent, plus what live holds (other than `besides`') may add."""
        live = [h for rid, h in self.held.items() if rid != besides and h.until > now]
        tokens = self.input_tokens + self.output_tokens + sum(h.tokens for h in live)
        return tokens, round(self.usd + sum(h.usd for h in live), 6)


def day_key(principal: str, now: datetime | None = None) -> str:
    day = (now or datetime.now(UTC)).strftime("%Y%m%d")
    return f"{key_for(principal)}.{day}"


def session_key(principal: str, session_id: str) -> str:
    return f"{key_for(principal)}.session.{key_for(session_id)}"


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


class Days:
    def __init__(self, kv: KeyValue) -> None:
        self.kv = kv

    async def load(self, principal: str, key: str | None = None) -> Day:
        found, _ = await get_model(self.kv, key or day_key(principal), Day)
        return found or Day()

    async def charge(
        self, principal: str, request_id: str, usage: Usage, usd: float, key: str | None = None
    ) -> tuple[Day, bool]:
        """Add one request's spend to its principal's day (or the day at `key`), once, and drop
        its hold; whether this call added it."""
        key = key or day_key(principal)
        async with TURNS.turn(key):
            return await self._charge(key, request_id, usage, usd)

    async def _charge(
        self, key: str, request_id: str, usage: Usage, usd: float
    ) -> tuple[Day, bool]:
        for attempt in range(CAS_TRIES):
            if attempt:
                await backoff(attempt)
            found, revision = await get_model(self.kv, key, Day)
            day = found or Day()
            if request_id in day.counted:
                return day, False
            now = time.time()
            added = Day(
                input_tokens=day.input_tokens + usage.input_tokens,
                output_tokens=day.output_tokens + usage.output_tokens,
                calls=day.calls + usage.calls,
                usd=round(day.usd + usd, 6),
                counted=[*day.counted, request_id][-REMEMBERED:],
                held={r: h for r, h in day.held.items() if r != request_id and h.until > now},
            )
            if await write_if(self.kv, key, added, revision) is not None:
                return added, True
        raise RuntimeError(f"could not count the spend of {request_id} (contention)")
