"""The one seam every service spends through: `Budget.step`.

    budget = Budget.of(bus)
    async with budget.step(request, ask) as meter:   # held, or OverBudget(limit): not sent
        meter.follow(reply)                            # its usage, as the calls happen
        ...                                            # settled as the block ends

Entering a step checks the request's own limits with the step's maximum (`ask`) counted in
advance, then holds the step against the principal's day and the session: from this process's
lease of them where it has one (leases.py: no bus write), else in the bucket (holds.py); when it
does not fit, `OverBudget` carries the `Limit` and the step is not to be sent (a one-call step
holds in neither; a larger one refused by its session keeps the day's hold until its request's
end drops it). Inside,
the caller adds what its calls use (`add`, or `follow` a reply filled in as it streams). The
step is settled as it ends, one way each:

- `await meter.count()`, or the block ending with nothing said: the request's spend (what it
  used before the step, `used`, and what the step added) is counted in its day and its session,
  once per request (a redelivery counts nothing), dropping its holds. Counting inside the
  block lets the caller count before it publishes the end: written before the end where the
  day is held step by step, in the lease's batch (written within a flush interval) where it is
  leased, and, when the bucket does not answer, kept and written once it does.
- `await meter.park(wait)`: the request waits for a person and sends nothing meanwhile: its
  holds are settled down to what it used, lapsing after the wait and its wall time.
- `meter.hand_on()`: the step goes on in another process (a worker, the evaluator) under the
  hold, and the request's end counts it (`allowance()` is what the step may spend there).
- An exception out of the block (a bus failure, the task cancelled at shutdown) counts nothing
  and leaves the hold as it is: the handler's message is delivered again, and the redelivered
  step takes the same hold over without a write (or it lapses at its wall-time limit; a
  handler whose deliveries ran out ends its request with `close`, which drops it). A failure
  that ends the request (a model's error) is the caller's to catch inside the block, which
  then ends normally and counts.

Callers name the request (`ChatRequested`, `RequestRouted`, anything with its id, principal,
session and start) and never see the keys, values or writes behind the step.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Literal, Protocol

from nats.js.kv import KeyValue

from contracts import Usage
from contracts.base import TaskBudget
from services.runtime.base.errors import SidekickError
from services.runtime.base.settings import Settings
from services.runtime.budgets.accounts import holder_of
from services.runtime.budgets.asks import Ask, Asks
from services.runtime.budgets.guard import request_guard
from services.runtime.budgets.ledger import Ledger
from services.runtime.budgets.limits import Limit, allowance, request_limit
from services.runtime.budgets.prices import cost, prices
from services.runtime.bus.core import Bus
from services.runtime.llm import BudgetGuard

log = logging.getLogger("sidekick.budgets")
Settled = Literal["counted", "parked", "handed on"]


class Spender(Protocol):
    """The request a step spends for, as the service that holds it sees it."""

    @property
    def request_id(self) -> str: ...

    @property
    def principal(self) -> str: ...

    @property
    def session_id(self) -> str: ...

    @property
    def ts(self) -> datetime: ...


class Metered(Protocol):
    """Something whose `usage` grows as its calls happen (a streamed call's result)."""

    @property
    def usage(self) -> Usage: ...


class OverBudget(SidekickError):
    """The step's maximum does not fit a limit (`limit`): it is not to be sent."""

    def __init__(self, limit: Limit) -> None:
        self.limit = limit
        super().__init__(limit.note())


class Budget:
    """A service's budgets: the step seam, the price table, and each step's `Ask` (`asks`)."""

    def __init__(self, bucket: Callable[[], KeyValue], settings: Settings, name: str = "") -> None:
        self.bucket = bucket  # the `budgets` bucket, looked up when a step needs it
        self.settings = settings
        self.table = prices(settings.prices)  # a setting that cannot be read stops the start
        self.asks = Asks(settings, self.table)
        self.ledger = Ledger(bucket, settings, self.table, name)  # this process's leases

    @classmethod
    def of(cls, bus: Bus) -> Budget:
        return cls(lambda: bus.kv.budgets, bus.settings, bus.service)

    async def drain(self) -> None:
        """The process stops: the counts it batched are written and its leases returned."""
        await self.ledger.drain()

    def cost(self, usage: Usage) -> float:
        """The money `usage` costs, by the price table."""
        return cost(usage, self.table)

    @contextlib.asynccontextmanager
    async def step(
        self,
        request: Spender,
        ask: Ask | None = None,
        *,
        part: str = "",
        used: Usage | None = None,
    ) -> AsyncIterator[Meter]:
        """One step of `request` (or of its `part` counted apart, e.g. "frontline"): `ask` held
        first (None: a step that sends nothing), settled as it ends (see the module). `used`:
        what the request used before the step (its count counts it too)."""
        holder = holder_of(request.request_id, part)
        used = used or Usage()
        granted = await self._hold(request, holder, ask, used) if ask is not None else None
        meter = Meter(self, request, holder, ask, granted, used)
        yield meter  # an exception from the block leaves here: the hold is left to its redelivery
        if meter.settled is None:
            await meter.count()

    async def close(self, request: Spender, *, part: str = "") -> None:
        """The end of a request (or part) that sends nothing more, its spend unknown (its
        deliveries ran out): nothing more is counted, its hold, if it took one, is dropped."""
        async with self.step(request, part=part):
            pass

    async def _hold(self, request: Spender, holder: str, ask: Ask, used: Usage) -> int:
        settings = self.settings
        seconds = time.time() - request.ts.timestamp()
        ahead = (ask.least, round(ask.least * ask.usd_per_token, 6))
        limit = request_limit(settings, used, seconds, self.table, ahead)
        if limit is not None:
            raise OverBudget(limit)
        who = (request.principal, request.session_id)
        if ask.tokens == ask.least and not ask.rest:  # one call: whole, in both, or in neither
            refused = await self.ledger.hold_both(who, holder, ask)
            if refused is not None:
                raise OverBudget(refused)
            return ask.tokens
        got = await self.ledger.hold_in_turn(who, holder, ask)
        if isinstance(got, Limit):
            raise OverBudget(got)
        return got


class Meter:
    """One step in progress: what it was granted, what it has used, and how it is settled."""

    def __init__(
        self,
        budget: Budget,
        request: Spender,
        holder: str,
        ask: Ask | None,
        granted: int | None,
        used: Usage,
    ) -> None:
        self.budget = budget
        self.request = request
        self.holder = holder
        self.ask = ask
        self.granted = granted  # tokens held for the step (None: it holds nothing)
        self.settled: Settled | None = None
        self._used = used
        self._following: list[Metered] = []

    @property
    def used(self) -> Usage:
        """The request's usage: before the step, and what the step added or follows."""
        total = self._used
        for source in self._following:
            total = total + source.usage
        return total

    def add(self, usage: Usage) -> None:
        self._used = self._used + usage

    def follow(self, source: Metered) -> None:
        """Count what `source.usage` says when the step is settled (a call that fills in its
        result as it streams, so a step that stops midway counts what it used)."""
        self._following.append(source)

    def guard(self) -> BudgetGuard:
        """The LLM client's guard for the step's call, checked against the request's own
        limits before each of its HTTP calls (a repair too)."""
        rate = self.ask.usd_per_token if self.ask is not None else 0.0
        budget = self.budget
        return request_guard(budget.settings, budget.table, self.request.ts, self.used, rate)

    def allowance(self) -> TaskBudget:
        """What the step may spend where it is sent (a worker, an evaluation): the request's
        limits less its usage, and no more tokens than the step was granted."""
        return allowance(self.budget.settings, self.used, self.granted)

    def hand_on(self) -> None:
        """The step goes on elsewhere under its hold; the request's end counts it."""
        self.settled = "handed on"

    async def count(self) -> bool:
        """Count the request's spend in its day and its session (once), dropping its holds;
        whether this call counted it (or queued it to be: a store that does not answer is
        tried again until it does, the answer standing meanwhile)."""
        self.settled = "counted"
        request = self.request
        who = (request.principal, request.session_id)
        try:
            return await self.budget.ledger.count(who, self.holder, self.used)
        except Exception as exc:  # the answer stands; only the count lacks it
            log.warning("request %s: could not count its spend: %r", request.request_id, exc)
            return False

    async def park(self, wait: float) -> None:
        """The request waits up to `wait` seconds for a person, sending nothing: its holds in
        its day and its session become what it used so far, until it may have ended (its
        wait, then its wall time)."""
        self.settled = "parked"
        request, settings = self.request, self.budget.settings
        used = self.used
        spent = (used.input_tokens + used.output_tokens, self.budget.cost(used))
        who = (request.principal, request.session_id)
        ttl = wait + settings.budget_request_seconds
        try:
            await self.budget.ledger.park(who, self.holder, spent, ttl)
        except Exception as exc:  # it parks all the same; its hold lapses in time
            log.warning("request %s: could not release its hold: %r", request.request_id, exc)
