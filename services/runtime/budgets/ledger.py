"""A process's budgets: holds, counts and parks of its requests' steps, each on the principal's
day and the session's key, from this process's lease of the key where it has one (leases.py),
else one by one in the bucket (holds.py, accounts.py).

A principal is busy here when this process held `HOT_STEPS` of its steps within `HOT_WINDOW`
seconds; then its day is leased, and, while the day is, its sessions. Below that a per-step
hold costs less than a lease would. Each account with a lease or a batch has a task of its own
(`schedule`) that writes the batch, renews the lease and returns it when idle; a count that the
bucket does not take is kept in the key's account and written again until it lands, once.
An account is forgotten once empty and no call has it in hand (`_using`): a process has one
account, and so one lease, per key."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import replace

from nats.js.kv import KeyValue

from contracts import Usage
from services.runtime.base.metrics import SPEND_TOKENS, SPEND_USD
from services.runtime.base.settings import Settings
from services.runtime.budgets import holds
from services.runtime.budgets.accounts import Days, day_key, session_key
from services.runtime.budgets.asks import Ask
from services.runtime.budgets.leases import (
    GUESSES,
    HOT_STEPS,
    HOT_WINDOW,
    LEASE,
    MAX_RECENT,
    Account,
    Guess,
    Pending,
    Unit,
)
from services.runtime.budgets.limits import Limit, Scope, limits_of
from services.runtime.budgets.prices import Table, cost

log = logging.getLogger("sidekick.budgets")


class Recent:
    """A principal's steps held here lately (when, and what each held), and their sums."""

    def __init__(self) -> None:
        self.steps: deque[tuple[float, int, float]] = deque()
        self.tokens, self.usd, self.last = 0, 0.0, 0.0

    def add(self, now: float, unit: Unit) -> None:
        self.steps.append((now, unit.tokens, unit.usd))
        self.tokens, self.usd, self.last = self.tokens + unit.tokens, self.usd + unit.usd, now

    def since(self, start: float) -> None:
        while self.steps and self.steps[0][0] < start:
            _, tokens, usd = self.steps.popleft()
            self.tokens, self.usd = self.tokens - tokens, self.usd - usd


class Ledger:
    """A process's accounts: holds, counts and parks, each on the day's and the session's key,
    from a lease where this process has one, else per step in the bucket (holds.py)."""

    def __init__(
        self, bucket: Callable[[], KeyValue], settings: Settings, table: Table, name: str = ""
    ) -> None:
        self.bucket = bucket
        self.settings = settings
        self.table = table
        self.lease_name = f"{LEASE}.{name or 'process'}.{uuid.uuid4().hex[:12]}"
        self.accounts: dict[str, Account] = {}
        self.recent: dict[str, Recent] = {}
        # How the last writes of each kind of key went when taken on a guess, so that a guess
        # that keeps failing (another process writes the same keys) is no longer made.
        self.guesses: dict[tuple[Scope, Guess], deque[bool]] = {}

    def guess(self, account: Account) -> Guess | None:
        """What a write may start from without reading: the value this process last read or
        wrote (`known`), or, for a key it has never seen, nothing (`absent`: a new session's
        first write is a create); None: read first. A guess is made while most of the last
        ones of its kind were right (a wrong one costs a write that fails, then the read)."""
        kind: Guess = "known" if account.known is not None else "absent"
        if kind == "absent" and account.scope != "session":
            return None
        past = self.guesses.get((account.scope, kind))
        if past is None or 2 * sum(past) >= len(past):
            return kind
        return kind if random.random() < 1 / GUESSES else None  # now and then, try again

    def guessed(self, scope: Scope, guess: Guess | None, *, right: bool) -> None:
        if guess is not None:
            self.guesses.setdefault((scope, guess), deque(maxlen=GUESSES)).append(right)

    def account(self, key: str, scope: Scope) -> Account:
        found = self.accounts.get(key)
        if found is None:
            if len(self.accounts) >= MAX_RECENT:
                for idle in list(self.accounts.values()):
                    self.forget(idle)
            found = self.accounts[key] = Account(self, key, scope)
        return found

    # --- each account's writer: its batch, its lease's renewal and return ------------------

    def schedule(self, account: Account) -> None:
        """Make sure the account's batch is written (and its lease renewed and returned) in
        time, by its own task."""
        if account.task is None or account.task.done():
            account.task = asyncio.get_running_loop().create_task(self._writer(account))
        account.wake.set()

    def _due(self, account: Account, now: float) -> float | None:
        """When the account's next write is due (epoch seconds), or None when nothing is left: a
        day's batch every flush interval, a session's when its lease is returned or renewed, a
        count the store did not take at once (after the pause `_writer` makes), the lease's
        renewal halfway through its time, its return once idle."""
        settings = self.settings
        due: list[float] = []
        if account.pending:
            if account.failures or not account.leased:
                due.append(now)
            elif account.scope == "daily":
                due.append(account.last_write + settings.budget_flush_seconds)
        if account.leased:
            due.append(account.until - settings.budget_lease_seconds / 2)
            if not any(h.until > now for h in account.holds.values()):
                due.append(account.last_active + settings.budget_idle_seconds)
        return min(due) if due else None

    async def _writer(self, account: Account) -> None:
        while True:
            now = time.time()
            due = self._due(account, now)
            if due is None:
                self.forget(account)
                return
            if due > now:
                account.wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(account.wake.wait(), due - now)
                continue
            try:
                await account.sync()
            except Exception as exc:
                account.failures += 1
                if account.failures == 1:
                    log.warning(
                        "could not write the budget of %s yet (%r); its counts are kept and "
                        "written once the store answers",
                        account.key,
                        exc,
                    )
                await asyncio.sleep(min(0.25 * account.failures, 5.0))
            else:
                if account.failures:
                    log.info("the budget of %s is written again", account.key)

    def forget(self, account: Account) -> None:
        """Drop an account with nothing left in it (no lease, no hold, no count to write, not
        found near its limit a moment ago) that no call of the ledger has in hand (`_using`)."""
        busy = account.task is not None and not account.task.done()
        if account.users or (busy and asyncio.current_task() is not account.task):
            return
        if account.cold_until > time.time():
            return
        empty = not account.leased and not account.pending and not account.holds
        if empty and self.accounts.get(account.key) is account:
            del self.accounts[account.key]

    def _accounts(self, who: tuple[str, str]) -> tuple[Account, Account]:
        principal, session_id = who
        return (
            self.account(day_key(principal), "daily"),
            self.account(session_key(principal, session_id), "session"),
        )

    @contextlib.contextmanager
    def _using(self, who: tuple[str, str]) -> Iterator[tuple[Account, Account]]:
        """The day's and the session's accounts of `who` (principal, session id), kept while
        the call has them in hand and forgotten after, if empty. An account forgotten while a
        call still had it (a count held one by one ending while a busy step waits to lease
        the day) would be leased by that step beside the new one that the next step finds:
        two leases of one process under one name, each write replacing the other's, and the
        holds of the one replaced held nowhere in the bucket."""
        accounts = self._accounts(who)
        for account in accounts:
            account.users += 1
        try:
            yield accounts
        finally:
            for account in accounts:
                account.users -= 1
                self.forget(account)

    def busy(self, principal: str, ask: Ask) -> tuple[bool, tuple[float, float]]:
        """Note a step of `principal`: whether it is busy here (HOT_STEPS steps within
        HOT_WINDOW before this one) and its recent holds per second (tokens, USD)."""
        now = time.monotonic()
        steps = self.recent.get(principal)
        if steps is None:
            if len(self.recent) >= MAX_RECENT:
                since = now - HOT_WINDOW
                self.recent = {p: s for p, s in self.recent.items() if s.last > since}
            steps = self.recent[principal] = Recent()
        steps.since(now - HOT_WINDOW)
        hot = len(steps.steps) >= HOT_STEPS
        steps.add(now, Unit.of(ask))
        span = max(now - steps.steps[0][0], 1.0)  # a burst counts as a second's worth at least
        return hot, (steps.tokens / span, steps.usd / span)

    async def _hold_at(
        self, account: Account, holder: str, ask: Ask, lease: bool, rate: tuple[float, float]
    ) -> int | Limit:
        settings = self.settings
        ttl = settings.budget_request_seconds
        got = account.take(holder, ask, ttl, time.time())
        if got is not None:
            return got
        if lease and time.time() >= account.cold_until:
            account.noted(ask, rate)
            try:
                await account.sync(grow=ask)
            except Exception as exc:  # the per-step hold below reads the store again
                log.info("could not lease %s: %r", account.key, exc)
            else:
                self.schedule(account)
            got = account.take(holder, ask, ttl, time.time())
            if got is not None:
                return got
        account.drop(holder)  # a hold in the bucket replaces one from the lease
        limits = limits_of(settings, account.scope)
        return await holds.hold(self.bucket(), account.key, holder, ask, limits, account.scope, ttl)

    async def _release(self, account: Account, holder: str) -> None:
        if account.drop(holder) is None:
            await holds.release(self.bucket(), account.key, holder)

    async def hold_both(self, who: tuple[str, str], holder: str, ask: Ask) -> Limit | None:
        """Hold one call's `ask` (whole or not at all) for `holder` in the day and the session
        of `who` (principal, session id) at once: None once held in both, else the limit it
        would pass (the day's first), with no hold left in either (holds.hold_both)."""
        if ask.tokens != ask.least:
            raise ValueError("hold_both holds one call's maximum: tokens == least")
        with self._using(who) as (day, session):
            hot, rate = self.busy(who[0], ask)
            if hot and not day.leased:  # the day first: its session leases once it does
                first = await self._hold_at(day, holder, ask, hot, rate)
                got = [first, await self._hold_at(session, holder, ask, day.leased, (0.0, 0.0))]
            else:
                got = list(
                    await asyncio.gather(
                        self._hold_at(day, holder, ask, hot, rate),
                        self._hold_at(session, holder, ask, hot and day.leased, (0.0, 0.0)),
                    )
                )
            refused = next((g for g in got if isinstance(g, Limit)), None)
            if refused is not None:  # nothing is sent: no hold stays
                for account, g in zip((day, session), got, strict=True):
                    if not isinstance(g, Limit):
                        await self._release(account, holder)
            return refused

    async def hold_in_turn(self, who: tuple[str, str], holder: str, ask: Ask) -> int | Limit:
        """Hold `ask` for `holder` in the day of `who`'s principal, then in its session no more
        than the day granted: the tokens granted in both, or the limit."""
        with self._using(who) as (day, session):
            hot, rate = self.busy(who[0], ask)
            got = await self._hold_at(day, holder, ask, hot, rate)
            if isinstance(got, Limit):
                return got
            granted = min(ask.tokens, got)
            more = await self._hold_at(
                session, holder, replace(ask, tokens=granted), hot and day.leased, (0.0, 0.0)
            )
            if isinstance(more, Limit):
                return more
            return min(granted, more)

    async def count(self, who: tuple[str, str], holder: str, usage: Usage) -> bool:
        """Count `holder`'s ended spend in the day and the session of `who`, once each,
        dropping its holds: now in the bucket, or in the batch of a leased account (written
        within a flush interval), or, when the store does not answer, kept and written once it
        does. Whether it was not known counted already (a redelivery's count is not)."""
        usd = cost(usage, self.table)
        with self._using(who) as (day, session):
            got = await asyncio.gather(
                self._count_at(day, holder, usage, usd),
                self._count_at(session, holder, usage, usd),
            )
        return got[0]

    async def _count_at(self, account: Account, holder: str, usage: Usage, usd: float) -> bool:
        if holder in account.pending or holder in account.counted:
            return False
        if account.leased or holder in account.holds:
            in_lease = account.drop(holder) is not None
            account.spend(holder, Pending(usage, usd, in_lease))
            account.last_active = time.time()
            self.schedule(account)
            return True
        try:
            _, fresh = await Days(self.bucket()).charge("", holder, usage, usd, key=account.key)
        except Exception as exc:
            log.warning(
                "could not count the spend of %s yet (%r); it is kept and counted once the "
                "store answers",
                holder,
                exc,
            )
            account.spend(holder, Pending(usage, usd, False))
            account.failures = max(account.failures, 1)
            self.schedule(account)
            return True
        if fresh and account.scope == "daily":
            self.spent(account.key, {holder: Pending(usage, usd, False)})
        return fresh

    def spent(self, key: str, fresh: dict[str, Pending]) -> None:
        """The Prometheus spend counters, for counts written for the first time in the day at
        `key` (which starts with the principal's hash: accounts.day_key)."""
        hashed = key[:12]
        for spent in fresh.values():
            for model, used in spent.usage.models.items():
                SPEND_TOKENS.labels(hashed, model, "input").inc(used.input_tokens)
                SPEND_TOKENS.labels(hashed, model, "output").inc(used.output_tokens)
                SPEND_USD.labels(hashed, model).inc(cost(Usage(models={model: used}), self.table))

    async def park(
        self, who: tuple[str, str], holder: str, spent: tuple[int, float], ttl: float
    ) -> None:
        """Settle `holder`'s holds down to `spent` (its tokens and money so far), lapsing `ttl`
        seconds from now: in the lease's memory where it held there, else in the bucket."""
        with self._using(who) as accounts:
            for account in accounts:
                # In the bucket even where it held from the lease: a person may take hours,
                # and the lease should not be kept (renewed) for as long.
                await holds.park(self.bucket(), account.key, holder, spent, ttl)
                account.drop(holder)

    async def drain(self) -> None:
        """The process stops: every batch written, every lease returned (its holds left as
        per-step holds that lapse as they would)."""
        for account in list(self.accounts.values()):
            if account.task is not None:
                account.task.cancel()
                with contextlib.suppress(BaseException):
                    await account.task
            if not account.leased and not account.pending:
                continue
            try:
                await account.sync(final=True)
            except Exception as exc:
                log.warning("could not return the lease of %s: %r", account.key, exc)
