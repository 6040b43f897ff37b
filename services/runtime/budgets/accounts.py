"""The accounts: what one principal spent in a UTC day, and what one session spent, each one key
in the `budgets` bucket (a day: hash of the principal and the day; a session: `session_key`).

A request's spend is added to both by compare-and-set once per request (the request ids counted
are kept in the value, so a redelivered end, or a second replica, never counts a request twice).
The same value keeps the holds of the requests in flight (holds.py), so that the counted spend
and every live hold are read and written together."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import TypeVar

from nats.js.kv import KeyValue
from pydantic import Field

from contracts import Model, Usage
from services.runtime.bus.kvstore import get_model, key_for, write_if

REMEMBERED = 5000  # request ids kept per principal-day against double counting
CAS_TRIES = 200  # compare-and-set tries on one key before giving up (many requests, one day)

R = TypeVar("R")


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


def holder_of(request_id: str, part: str = "") -> str:
    """The name a request's hold and count go under in a day's value: its id, or, for a part
    counted apart from the rest (the frontline's call), `<id>.<part>`; the two are entries
    that never stand for each other."""
    return f"{request_id}.{part}" if part else request_id


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

        def count(day: Day) -> tuple[Day | None, tuple[Day, bool]]:
            if request_id in day.counted:
                return None, (day, False)
            now = time.time()
            added = Day(
                input_tokens=day.input_tokens + usage.input_tokens,
                output_tokens=day.output_tokens + usage.output_tokens,
                calls=day.calls + usage.calls,
                usd=round(day.usd + usd, 6),
                counted=[*day.counted, request_id][-REMEMBERED:],
                held={r: h for r, h in day.held.items() if r != request_id and h.until > now},
            )
            return added, (added, True)

        key = key or day_key(principal)
        return await change_day(self.kv, key, count, f"count the spend of {request_id}")


async def change_day(
    kv: KeyValue, key: str, change: Callable[[Day], tuple[Day | None, R]], what: str
) -> R:
    """Write what `change` makes of the day (or session) at `key`, by compare-and-set in the
    key's turn, reading it again after a backoff while other writers come first. `change` gets
    the value (an empty `Day` where there is none) and returns the value to write (None: write
    nothing) and the result; `what` names the change in the error once every try collided."""
    async with TURNS.turn(key):
        for attempt in range(CAS_TRIES):
            if attempt:
                await backoff(attempt)
            found, revision = await get_model(kv, key, Day)
            value, result = change(found or Day())
            if value is None or await write_if(kv, key, value, revision) is not None:
                return result
    raise RuntimeError(f"could not {what} (contention)")
