"""Holds: before a model step is sent, the request holds what the step may take against its
principal's day and its session, so that concurrent requests cannot together pass a limit.

A hold is the request's usage so far plus the step's maximum (its prompt estimated, its
`max_tokens` counted in full, priced by the table); it is one entry of the day's value, keyed by
request id and written by compare-and-set, so that for every hold granted

    spent + every live hold <= the limit

held at the moment it was written. A step whose maximum does not fit is not sent. When the request
ends its actual usage is counted and its hold dropped in the same write (`Days.charge`), so the
unused part returns to the day. A hold lapses `ttl` seconds after it was taken (the request's
wall-time limit), so a request that died holds nothing for long. The day's counted spend can
thus pass its limit only by what a step used beyond its hold (a prompt longer than estimated, the
decision's repair call; a worker's or a verdict's repair is checked against its grant).

So that a request let in can finish its attempt, a step also holds the rest of its attempt
where that fits (`Ask.rest`): the decision holds the worker's call and the evaluation too, the
worker's step the evaluation; each later hold replaces the request's earlier one, and a step
its request's hold already covers writes nothing.

A step of a worker that loops over model calls (TOOLS, RESEARCH) holds up to its allowance, less
when less is left, but at least one call's maximum; what it was granted is what it may use
(`TaskBudget.tokens`), checked before each of its calls.

`hold` holds one key; `hold_both` holds one call in the day and the session at once (refused in
one, it is held in neither); `Days.charge` (accounts.py) counts an ended spend, dropping its
hold, once. The ledger (ledger.py) does the same key by key, from this process's lease of a key
where it has one (leases.py), and comes here for a step that its lease cannot take; a step that
may take more (a loop's allowance, the rest of its attempt) is held in the day first and then
in the session, which holds no more than the day granted (`Ledger.hold_in_turn`).

A request that parks (for a person's answer or approval) sends nothing while it waits: its hold
is settled down to what it has used (`park`), so the unspent part returns to the day at once
rather than when the hold lapses; the step it takes on resuming holds again.
"""

from __future__ import annotations

import asyncio
import math
import time

from nats.js.kv import KeyValue

from services.runtime.base.settings import Settings
from services.runtime.budgets.accounts import Day, Hold, change_day, day_key, session_key
from services.runtime.budgets.asks import Ask
from services.runtime.budgets.limits import Limit, Scope, limits_of

PARKED = "parked"  # the step name of a parked request's hold: what it used, nothing ahead


async def hold(
    kv: KeyValue,
    key: str,
    request_id: str,
    ask: Ask,
    limits: tuple[int, float],
    scope: Scope,
    ttl: float,
) -> int | Limit:
    """Hold `ask` at `key` (a day, or a session) under `limits`: the tokens granted to the step,
    or the limit it would pass. Taking the same step again (a redelivery) grants the same."""

    def take(day: Day) -> tuple[Day | None, int | Limit]:
        mine = day.held.get(request_id)
        if mine is not None and mine.step == ask.step:
            return None, min(max(mine.tokens - ask.used_tokens, 0), ask.tokens)
        if request_id in day.counted:
            return None, ask.tokens  # counted already: it has ended, nothing more is sent for it
        now = time.time()
        if mine is not None and mine.until > now and _covers(mine, ask):
            return None, ask.tokens  # its hold (of its whole attempt) covers this step: no write
        tokens, usd = day.committed(now, besides=request_id)
        room = limits[0] - tokens - ask.used_tokens
        granted = min(ask.tokens + ask.rest, room)
        if ask.usd_per_token > 0:
            money_room = limits[1] - usd - ask.used_usd
            granted = min(granted, math.floor(money_room / ask.usd_per_token))
        if granted < ask.least:
            return None, _refusal(ask, limits, scope, tokens, usd, room)
        held = {r: h for r, h in day.held.items() if h.until > now and r != request_id}
        held[request_id] = Hold(
            tokens=ask.used_tokens + granted,
            usd=round(ask.used_usd + granted * ask.usd_per_token, 6),
            step=ask.step,
            until=now + ttl,
        )
        return day.model_copy(update={"held": held}), min(granted, ask.tokens)

    return await change_day(kv, key, take, f"hold a step of {request_id}")


def _covers(mine: Hold, ask: Ask) -> bool:
    tokens = ask.used_tokens + ask.tokens + ask.rest
    usd = ask.used_usd + (ask.tokens + ask.rest) * ask.usd_per_token
    return mine.tokens >= tokens and mine.usd >= round(usd, 6)


def _refusal(
    ask: Ask, limits: tuple[int, float], scope: Scope, tokens: int, usd: float, room: int
) -> Limit:
    if room < ask.least:
        return Limit(f"{scope} tokens", limits[0], tokens + ask.used_tokens, ask.least)
    needed = round(ask.least * ask.usd_per_token, 6)
    return Limit(f"{scope} money (USD)", limits[1], round(usd + ask.used_usd, 6), needed)


async def hold_both(
    kv: KeyValue,
    settings: Settings,
    who: tuple[str, str],
    holder: str,
    ask: Ask,
) -> Limit | None:
    """Hold one call's `ask` (its maximum, whole or not at all) for `holder` against the day of
    `who`'s principal and its session (`who`: principal, session id), both at once: None once
    held in both, else the limit it would pass (the day's first), with no hold left in either."""
    if ask.tokens != ask.least:
        raise ValueError("hold_both holds one call's maximum: tokens == least")
    principal, session_id = who
    scopes: tuple[tuple[Scope, str], ...] = (
        ("daily", day_key(principal)),
        ("session", session_key(principal, session_id)),
    )
    ttl = settings.budget_request_seconds
    got = await asyncio.gather(
        *(hold(kv, key, holder, ask, limits_of(settings, s), s, ttl) for s, key in scopes)
    )
    refused = next((g for g in got if isinstance(g, Limit)), None)
    if refused is not None:  # nothing is sent: no hold stays
        for (_, key), g in zip(scopes, got, strict=True):
            if not isinstance(g, Limit):
                await release(kv, key, holder)
    return refused


async def release(kv: KeyValue, key: str, holder: str) -> None:
    """Drop `holder`'s hold at `key` without counting anything (its step is not sent)."""

    def drop(day: Day) -> tuple[Day | None, None]:
        if holder not in day.held:
            return None, None
        held = {r: h for r, h in day.held.items() if r != holder}
        return day.model_copy(update={"held": held}), None

    await change_day(kv, key, drop, f"release the hold of {holder}")


async def park(
    kv: KeyValue, key: str, request_id: str, used: tuple[int, float], ttl: float
) -> None:
    """Settle the request's hold at `key` (a day, or a session) down to `used` (its tokens and
    money so far), lapsing `ttl` seconds from now; nothing once its spend was counted."""

    def settle(day: Day) -> tuple[Day | None, None]:
        if request_id in day.counted:
            return None, None
        now = time.time()
        held = {r: h for r, h in day.held.items() if h.until > now and r != request_id}
        held[request_id] = Hold(tokens=used[0], usd=used[1], step=PARKED, until=now + ttl)
        return day.model_copy(update={"held": held}), None

    await change_day(kv, key, settle, f"settle the hold of {request_id}")
