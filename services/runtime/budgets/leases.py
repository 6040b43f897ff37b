"""Leases: a process's slice of a principal's day (or of a session's allowance), taken by one
compare-and-set, spent in memory step by step, and counted into, topped up, renewed and returned
the same way. An `Account` is this process's side of one key of the `budgets` bucket; the
`Ledger` (ledger.py) keeps them and decides, step by step, whether a lease or a per-step hold
(holds.py) serves.

A lease is one entry of the key's value (`held["lease.<service>.<id>"]`, step `lease`), so the
invariant of per-step holds covers it unchanged: at every write that grows a reservation,
counted + every live lease + every live per-step hold <= the limit. In memory, the lease's live
holds plus the spend counted here but not yet written (`pending`) never pass the lease.

One write (`sync`) does all there is to do: adds the batch to the count (by request id: one
that another process or a redelivery counted first is not counted again), shrinks the lease by
what its holds spent, renews it for SIDEKICK_BUDGET_LEASE_SECONDS, grows it when a step did not
fit (the recent rate over `HORIZON` seconds, at least `SLICE_STEPS` steps, never more than a
fair share: half of what is left, split among the leases there), shrinks it to what is in use
near the limit (less left than `FEW_SLICES` slices) or when idle (no step for
SIDEKICK_BUDGET_IDLE_SECONDS), never writes it back larger than the room left (one that lapsed
while its process stalled: a fair share, as a new one), and, as the process stops,
returns it, the holds it still has left as per-step holds. A day's account writes every
SIDEKICK_BUDGET_FLUSH_SECONDS, a session's when its lease is returned or renewed; a count that
cannot be written is kept and written again until it lands. A lease whose process died lapses
at its `until`; the counts it had not written are lost with it (at most one flush interval of
its spend, never more than its lease). docs/budgets.md ("Leases") gives the bounds."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from nats.js.kv import KeyValue

from contracts import Usage
from services.runtime.base.settings import Settings
from services.runtime.budgets.accounts import CAS_TRIES, REMEMBERED, TURNS, Day, Hold, backoff
from services.runtime.budgets.asks import Ask
from services.runtime.budgets.limits import Scope, limits_of
from services.runtime.bus.kvstore import get_model, write_if

log = logging.getLogger("sidekick.budgets")

LEASE = "lease"  # the step name of a lease's entry in a day's (or a session's) value
HOT_STEPS = 3  # a principal with this many steps held here within HOT_WINDOW leases
HOT_WINDOW = 10.0  # seconds
SLICE_STEPS = 8  # a lease is at least this many holds of the step that asks for it
FEW_SLICES = 4  # less left than this many slices: per-step holds (near the limit)
HORIZON = 2.0  # seconds of the recent rate a lease is sized for (two flush intervals at least)
COLD = 1.0  # seconds a key found near its limit is held per step before a lease is tried again
MAX_RECENT = 10_000  # principals remembered for their rate before the idle ones are dropped
GUESSES = 8  # the writes remembered per kind of guess (ledger.Ledger.guess)
Guess = Literal["known", "absent"]


class Owner(Protocol):
    """What an account needs of the ledger that keeps it (ledger.Ledger)."""

    bucket: Callable[[], KeyValue]
    settings: Settings
    lease_name: str

    def guess(self, account: Account) -> Guess | None: ...

    def guessed(self, scope: Scope, guess: Guess | None, *, right: bool) -> None: ...

    def spent(self, key: str, fresh: dict[str, Pending]) -> None: ...

    def forget(self, account: Account) -> None: ...


@dataclass
class Held:
    """A step's hold taken from the lease (as `Hold`, in memory)."""

    tokens: int
    usd: float
    step: str
    until: float


@dataclass
class Pending:
    """A request's spend counted here, not yet written; `in_lease`: its hold was the lease's,
    so the lease shrinks by it when it is written."""

    usage: Usage
    usd: float
    in_lease: bool

    @property
    def tokens(self) -> int:
        return self.usage.input_tokens + self.usage.output_tokens


@dataclass(frozen=True)
class Unit:
    """What one step's hold takes (tokens, USD): leases are sized in these."""

    tokens: int
    usd: float

    @classmethod
    def of(cls, ask: Ask) -> Unit:
        ahead = ask.tokens + ask.rest
        return cls(ask.used_tokens + ahead, round(ask.used_usd + ahead * ask.usd_per_token, 6))


def _hold_of(ask: Ask) -> tuple[int, float]:
    unit = Unit.of(ask)
    return unit.tokens, unit.usd


def _covers(mine: Held, ask: Ask) -> bool:
    tokens, usd = _hold_of(ask)
    return mine.tokens >= tokens and mine.usd >= usd


class Account:
    """This process's side of one key (a principal's day, or a session): its lease, the holds
    taken from it, and the counts not yet written."""

    def __init__(self, ledger: Owner, key: str, scope: Scope) -> None:
        self.ledger = ledger
        self.key = key
        self.scope = scope
        self.size: tuple[int, float] = (0, 0.0)  # the lease as last written (0, 0: none)
        self.until = 0.0
        # Changed only through hold/drop/spend/written, which keep the sums of what is in use.
        self.holds: dict[str, Held] = {}
        self.pending: dict[str, Pending] = {}
        self._held = (0, 0.0)  # the holds' sum (lapsed ones too, until a write prunes them)
        self._spent = (0, 0.0)  # the sum of the pending spend whose hold was the lease's
        self.counted: set[str] = set()  # holders known counted (read here, or written here)
        self.known: tuple[Day, int] | None = None  # the value last read or written here
        self.unit = Unit(0, 0.0)  # the largest step seen asking, what leases are sized in
        self.rate = (0.0, 0.0)  # the principal's recent holds per second (tokens, USD)
        self.last_write = 0.0
        self.last_active = 0.0
        self.cold_until = 0.0  # near the limit: no lease tried before this
        self.shrinking = False  # a write that shrinks the lease is on its way: take nothing
        self.users = 0  # the ledger's calls that have it in hand (it is not forgotten meanwhile)
        self.failures = 0
        self.wake = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    @property
    def leased(self) -> bool:
        return self.size[0] > 0 or self.size[1] > 0

    def in_use(self, besides: str = "") -> tuple[int, float]:
        """What the lease has in use: its holds and the spend of its holds not yet written
        (`besides`' hold left out)."""
        tokens, usd = self._held[0] + self._spent[0], self._held[1] + self._spent[1]
        mine = self.holds.get(besides) if besides else None
        if mine is not None:
            tokens, usd = tokens - mine.tokens, usd - mine.usd
        return tokens, round(usd, 6)

    def hold(self, holder: str, held: Held) -> None:
        self.drop(holder)
        self.holds[holder] = held
        self._held = (self._held[0] + held.tokens, self._held[1] + held.usd)

    def drop(self, holder: str) -> Held | None:
        held = self.holds.pop(holder, None)
        if held is not None:
            self._held = (self._held[0] - held.tokens, self._held[1] - held.usd)
        return held

    def spend(self, holder: str, spent: Pending) -> None:
        """`holder`'s ended spend, to be written with the next batch (its hold dropped)."""
        self.written(holder)
        self.pending[holder] = spent
        if spent.in_lease:
            self._spent = (self._spent[0] + spent.tokens, self._spent[1] + spent.usd)

    def written(self, holder: str) -> None:
        spent = self.pending.pop(holder, None)
        if spent is not None and spent.in_lease:
            self._spent = (self._spent[0] - spent.tokens, self._spent[1] - spent.usd)

    def take(self, holder: str, ask: Ask, ttl: float, now: float) -> int | None:
        """The step's hold from the lease, as holds.py grants one (a redelivered step gets what
        it got; a step its request's hold covers takes nothing more), or None when the lease
        has no room for all it asks (`ask.tokens` and the rest of its attempt)."""
        mine = self.holds.get(holder)
        if mine is not None and mine.until <= now:
            self.drop(holder)
            mine = None
        if mine is not None and mine.step == ask.step:
            return min(max(mine.tokens - ask.used_tokens, 0), ask.tokens)
        if holder in self.counted or holder in self.pending:
            return ask.tokens  # counted already: it has ended, nothing more is sent for it
        if mine is not None and _covers(mine, ask):
            return ask.tokens
        if not self.leased or self.shrinking or self.until <= now:
            return None  # no lease, one on its way down, or one that lapsed (not renewed)
        tokens, usd = _hold_of(ask)
        used_tokens, used_usd = self.in_use(besides=holder)
        if used_tokens + tokens > self.size[0] or used_usd + usd > self.size[1] + 1e-9:
            return None
        self.hold(holder, Held(tokens, usd, ask.step, now + ttl))
        self.last_active = now
        return ask.tokens

    def noted(self, ask: Ask, rate: tuple[float, float]) -> None:
        unit = Unit.of(ask)
        self.unit = Unit(max(self.unit.tokens, unit.tokens), max(self.unit.usd, unit.usd))
        self.rate = rate

    # --- the one write -------------------------------------------------------------------

    async def sync(self, grow: Ask | None = None, *, final: bool = False) -> None:
        """One compare-and-set of the key: the batched counts added (each request once), the
        lease shrunk by what its holds spent, renewed, and grown (`grow`: a step that did not
        fit; nothing is written when, its turn come, it fits), shrunk to what it has in use
        near the limit or when idle, or (`final`: the process stops) returned, its holds left
        as per-step holds."""
        async with TURNS.turn(self.key):
            if grow is not None and self.fits(grow):
                return  # another step's write grew it meanwhile
            await self._sync(grow is not None, final)

    def fits(self, ask: Ask) -> bool:
        """Whether the lease has room for all `ask` asks (a new hold of it)."""
        if not self.leased or self.shrinking or self.until <= time.time():
            return False
        tokens, usd = _hold_of(ask)
        used_tokens, used_usd = self.in_use()
        return used_tokens + tokens <= self.size[0] and used_usd + usd <= self.size[1] + 1e-9

    async def _sync(self, grow: bool, final: bool) -> None:
        kv = self.ledger.bucket()
        for attempt in range(CAS_TRIES):
            if attempt:
                await backoff(attempt)
            guess = self.ledger.guess(self) if not attempt else None
            if guess == "known" and self.known is not None:
                day, revision = self.known
            elif guess == "absent":
                day, revision = Day(), 0
            else:
                found, revision = await get_model(kv, self.key, Day)
                day = found or Day()
            now = time.time()
            batch = dict(self.pending)
            value, size, fresh, shrink = self._next(day, batch, now, grow, final)
            if value is None:
                self.known = (day, revision)
                return
            self.shrinking = shrink
            try:
                written = await write_if(kv, self.key, value, revision)
            finally:
                self.shrinking = False
            self.ledger.guessed(self.scope, guess, right=written is not None)
            if written is None:
                self.known = None
                continue
            self._wrote(day, value, written, batch, size, fresh, now)
            return
        raise RuntimeError(f"could not write the budget of {self.key} (contention)")

    def _next(
        self, day: Day, batch: dict[str, Pending], now: float, grow: bool, final: bool
    ) -> tuple[Day | None, tuple[int, float], dict[str, Pending], bool]:
        """The value to write (None: nothing to), the lease's new size, the counts it adds
        for the first time, and whether it shrinks the lease below what it had room for."""
        counted_before = set(day.counted)
        fresh = {h: p for h, p in batch.items() if h not in counted_before}
        add = Usage()
        for spent in fresh.values():
            add = add + spent.usage
        add_usd = round(sum(p.usd for p in fresh.values()), 6)
        name = self.ledger.lease_name
        held = {r: h for r, h in day.held.items() if h.until > now and r not in batch and r != name}
        gone = {h for h in self.holds if h in counted_before or self.holds[h].until <= now}
        live = {h: v for h, v in self.holds.items() if h not in gone}
        rest = {h: p for h, p in self.pending.items() if h not in batch}
        use_t = sum(v.tokens for v in live.values()) + sum(
            p.usage.input_tokens + p.usage.output_tokens for p in rest.values() if p.in_lease
        )
        use_u = round(
            sum(v.usd for v in live.values()) + sum(p.usd for p in rest.values() if p.in_lease),
            6,
        )
        leaving = [p for p in batch.values() if p.in_lease]
        out_t = sum(p.usage.input_tokens + p.usage.output_tokens for p in leaving)
        out_u = sum(p.usd for p in leaving)
        keep = (max(self.size[0] - out_t, use_t), round(max(self.size[1] - out_u, use_u), 6))
        if not self.leased:
            keep = (0, 0.0)
        counted_t = day.input_tokens + day.output_tokens + add.input_tokens + add.output_tokens
        counted_u = day.usd + add_usd
        limits = limits_of(self.ledger.settings, self.scope)
        room_t = limits[0] - counted_t - sum(h.tokens for h in held.values())
        room_u = limits[1] - counted_u - sum(h.usd for h in held.values())
        leases = sum(1 for h in held.values() if h.step == LEASE)
        fair_t = math.floor(room_t / (2 * (leases + 1)))
        fair_u = room_u / (2 * (leases + 1))
        # Written back, a lease takes no more than the room left; one that lapsed (its process
        # stalled: others may have taken its room) no more than a fair share, as a new one. What
        # its steps granted have in use stays, as their per-step holds would.
        entry = day.held.get(name)
        lapsed = self.until <= now or entry is None or entry.until <= now
        cap_t, cap_u = (fair_t, fair_u) if lapsed else (room_t, room_u)
        had = keep  # the lease as this process has it, less what its batch spent
        if self.leased:
            keep = (max(use_t, min(keep[0], cap_t)), round(max(use_u, min(keep[1], cap_u)), 6))
        unit = self.unit
        near = room_t < FEW_SLICES * SLICE_STEPS * unit.tokens or (
            unit.usd > 0 and room_u < FEW_SLICES * SLICE_STEPS * unit.usd
        )
        idle = not live and now - self.last_active >= self.ledger.settings.budget_idle_seconds
        if final:
            size = (0, 0.0)
            for holder, mine in live.items():  # per-step holds now, lapsing as they would
                held[holder] = Hold(
                    tokens=mine.tokens, usd=round(mine.usd, 6), step=mine.step, until=mine.until
                )
        elif near or (idle and not grow):
            size = (use_t, use_u) if self.leased else (0, 0.0)
            if near:
                self.cold_until = now + COLD
        elif grow:
            # Enough for two flush intervals at the recent rate: a batch rarely has to grow it.
            horizon = max(HORIZON, 2 * self.ledger.settings.budget_flush_seconds)
            want_t = max(SLICE_STEPS * unit.tokens, math.ceil(self.rate[0] * horizon))
            want_u = max(SLICE_STEPS * unit.usd, self.rate[1] * horizon)
            size = (
                max(keep[0], min(use_t + want_t, fair_t)),
                round(max(keep[1], min(use_u + want_u, fair_u)), 6),
            )
        else:
            size = keep
        renew = self.leased and self.until - now <= self.ledger.settings.budget_lease_seconds / 2
        if not (batch or final or size != had or renew):
            return None, size, fresh, False
        shrink = final or size[0] < had[0] or size[1] < had[1]  # takes wait for the write
        if size[0] > 0 or size[1] > 0:
            held[name] = Hold(
                tokens=size[0],
                usd=round(size[1], 6),
                step=LEASE,
                until=now + self.ledger.settings.budget_lease_seconds,
            )
        value = Day(
            input_tokens=day.input_tokens + add.input_tokens,
            output_tokens=day.output_tokens + add.output_tokens,
            calls=day.calls + add.calls,
            usd=round(counted_u, 6),
            counted=[*day.counted, *fresh][-REMEMBERED:],
            held=held,
        )
        return value, size, fresh, shrink

    def _wrote(
        self,
        before: Day,
        value: Day,
        revision: int,
        batch: dict[str, Pending],
        size: tuple[int, float],
        fresh: dict[str, Pending],
        now: float,
    ) -> None:
        self.known = (value, revision)
        grew = size[0] > self.size[0] or size[1] > self.size[1]
        self.size = size
        if self.leased:
            self.until = now + self.ledger.settings.budget_lease_seconds
        for holder in batch:
            self.written(holder)
        self.counted = set(value.counted)
        counted_before = set(before.counted)
        for holder in [h for h, v in self.holds.items() if h in counted_before or v.until <= now]:
            self.drop(holder)  # counted by another process (it has ended), or lapsed
        if not self.leased:
            for holder in list(self.holds):
                self.drop(holder)  # a final write left them as per-step holds
        self.last_write = now
        self.failures = 0
        if self.scope == "daily":
            self.ledger.spent(self.key, fresh)
        if grew:
            self.last_active = now
