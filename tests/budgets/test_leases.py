"""Budgets by lease (services/runtime/budgets/leases.py), through the seam `Budget.step`, on a KV
bucket in memory and on the real server, each `Budget` standing for one process:

- a busy principal's steps are held from its lease: after the lease is taken they write nothing
  to the bucket, and the counts land in one write per flush interval, each request once;
- two processes racing many concurrent steps of one principal, each step using exactly what it
  held: at every write the day's count plus every live lease and hold stays within the limit,
  and the day ends with every call counted once and never past the limit;
- a request counted by one process and counted again by another (a redelivery) counts once;
- the lease of a process that died lapses after SIDEKICK_BUDGET_LEASE_SECONDS: its room returns;
- a process that stalls past its lease, its room taken meanwhile, grants nothing from the lapsed
  lease and writes it back no larger than the room left: the day is never over-committed;
- a count the bucket refuses is kept and lands, once, when the bucket takes writes again;
- a stopping process writes its counts and returns its lease, its holds left as per-step holds;
- near the limit no lease is taken: steps are held one by one in the bucket;
- a count held one by one that ends while the first busy step waits to lease the day leaves
  one account, and one lease, of the day in the process: every step in flight stays held."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from contracts import Usage
from services.runtime.base.settings import Settings
from services.runtime.budgets import Ask, Budget, OverBudget
from services.runtime.budgets.accounts import TURNS, Day, day_key, session_key
from services.runtime.budgets.leases import HOT_STEPS, LEASE
from tests.support.budgets import Req

STEP = 1000  # tokens one step holds (one call's maximum)
USED = Usage.of_call("m", 600, 400)  # and uses: all of it


class Watched:
    """The bucket, with every operation recorded and every value written checked against the
    day's limit (`limit`: counted plus every live hold and lease, at the moment it is
    written); `refusing`: writes fail as when the store does not answer."""

    def __init__(self, kv: Any, limit: int = 0) -> None:
        self.kv = kv
        self.limit = limit
        self.ops: list[tuple[str, str]] = []
        self.worst = 0  # the most the day's value ever committed
        self.leased = False  # whether a lease was ever written in the day
        self.refusing = False

    async def get(self, key: str) -> Any:
        self.ops.append(("get", key))
        return await self.kv.get(key)

    def _check(self, key: str, value: bytes) -> None:
        if self.refusing:
            raise TimeoutError("the store did not answer")
        if key == day_key("pat"):
            day = Day.model_validate_json(value)
            self.worst = max(self.worst, day.committed(time.time())[0])
            self.leased = self.leased or bool(leases(day))

    async def create(self, key: str, value: bytes) -> int:
        self.ops.append(("write", key))
        self._check(key, value)
        return int(await self.kv.create(key, value))

    async def update(self, key: str, value: bytes, last: int) -> int:
        self.ops.append(("write", key))
        self._check(key, value)
        return int(await self.kv.update(key, value, last=last))


def budget(kv: Any, **settings: Any) -> Budget:
    return Budget(lambda: kv, Settings(**{"budget_flush_seconds": 0.2, **settings}), "test")


def one_call(step: str = "frontline") -> Ask:
    return Ask(step, 0, 0.0, STEP, STEP, 0.0)


async def stored(kv: Any, key: str) -> Day:
    return Day.model_validate_json((await kv.get(key)).value or b"")


def leases(day: Day) -> dict[str, int]:
    return {name: h.tokens for name, h in day.held.items() if h.step == LEASE}


async def step(spend: Budget, request_id: str, **req: Any) -> None:
    async with spend.step(Req(request_id, **req), one_call(), part="frontline") as meter:
        meter.add(USED)


async def test_a_busy_principal_steps_from_its_lease_and_its_counts_land_in_batches(
    kv: Any,
) -> None:
    watched = Watched(kv)
    spend = budget(watched)
    for i in range(HOT_STEPS + 2):  # not busy yet: held and counted step by step
        await step(spend, f"r{i}")
    leased = len(watched.ops)
    for i in range(HOT_STEPS + 2, 40):
        await step(spend, f"r{i}")
    # 35 more steps: a few writes as the lease grows with the rate, no read or write per step
    assert len(watched.ops[leased:]) <= 8, watched.ops[leased:]
    day = await stored(kv, day_key("pat"))
    assert list(leases(day)) == [spend.ledger.lease_name]
    assert leases(day)[spend.ledger.lease_name] >= 8 * STEP  # at least eight steps' holds
    stepped = len(watched.ops)
    await asyncio.sleep(0.5)  # one flush interval and more
    day = await stored(kv, day_key("pat"))
    assert (day.input_tokens, day.output_tokens, day.calls) == (40 * 600, 40 * 400, 40)
    assert sorted(day.counted) == sorted(f"r{i}.frontline" for i in range(40))
    writes = [op for op in watched.ops[stepped:] if op[0] == "write"]
    assert len(writes) <= 3, writes  # the day's batch; the two leases returned once idle
    await asyncio.sleep(1.0)  # idle: the leases go back
    for key in (day_key("pat"), session_key("pat", "pat/s1")):
        day = await stored(kv, key)
        assert (day.calls, day.held) == (40, {})


async def test_two_processes_racing_one_principal_never_pass_the_day(kv: Any) -> None:
    limit = 60 * STEP
    watched = Watched(kv, limit)
    a, b = budget(watched, budget_daily_tokens=limit), budget(watched, budget_daily_tokens=limit)
    refused: list[OverBudget] = []
    made: list[str] = []

    async def one(spend: Budget, request_id: str, session: str) -> None:
        try:
            async with spend.step(Req(request_id, session_id=session), one_call()) as meter:
                await asyncio.sleep(0.01)  # the call, while other steps are held
                made.append(request_id)
                meter.add(USED)
        except OverBudget as exc:
            refused.append(exc)

    for wave in range(3):
        await asyncio.gather(
            *(one(a if i % 2 else b, f"w{wave}r{i}", f"pat/s{i % 5}") for i in range(40))
        )
    await asyncio.sleep(0.5)
    day = await stored(kv, day_key("pat"))
    assert watched.leased  # the race began on leases and ended step by step
    assert watched.worst <= limit  # at every write: counted + every live lease and hold
    assert day.input_tokens + day.output_tokens == len(made) * STEP <= limit
    assert day.calls == len(made) and sorted(day.counted) == sorted(made)
    assert refused and len(made) + len(refused) == 120
    assert all("daily tokens" in r.limit.note() for r in refused)


async def test_a_request_counted_by_two_processes_counts_once(kv: Any) -> None:
    a, b = budget(kv), budget(kv)
    for i in range(HOT_STEPS + 3):  # both busy, both leasing
        await step(a, f"a{i}")
        await step(b, f"b{i}")
    assert len(leases(await stored(kv, day_key("pat")))) == 2
    async with a.step(Req("r1"), one_call(), part="frontline") as meter:
        meter.add(USED)
    async with b.step(Req("r1"), one_call(), part="frontline") as meter:  # a redelivery
        meter.add(USED)
    await asyncio.sleep(0.6)
    day = await stored(kv, day_key("pat"))
    assert day.counted.count("r1.frontline") == 1
    assert day.calls == 2 * (HOT_STEPS + 3) + 1


async def test_a_dead_processes_lease_lapses_and_its_room_returns(kv: Any) -> None:
    dead = budget(kv, budget_lease_seconds=1.0, budget_daily_tokens=100 * STEP)
    for i in range(HOT_STEPS + 2):
        await step(dead, f"r{i}")
    holding = asyncio.Event()

    async def in_flight() -> None:
        async with dead.step(Req("inflight"), one_call(), part="frontline"):
            holding.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(in_flight())
    await holding.wait()
    task.cancel()  # the process dies mid-call: nothing of it runs again
    for account in dead.ledger.accounts.values():
        if account.task is not None:
            account.task.cancel()
    day = await stored(kv, day_key("pat"))
    lease = day.held[dead.ledger.lease_name]
    assert lease.tokens >= 8 * STEP  # its slice, with the call in flight held in it
    assert "inflight.frontline" not in day.held
    counted = day.input_tokens + day.output_tokens
    assert day.committed(time.time())[0] == counted + lease.tokens
    await asyncio.sleep(1.2)
    day = await stored(kv, day_key("pat"))
    assert day.committed(time.time())[0] == counted  # lapsed: its room is the day's again
    # Another process leases from the day as if the dead one had never held any of it.
    other = budget(kv, budget_daily_tokens=100 * STEP)
    for i in range(HOT_STEPS + 1):
        await step(other, f"o{i}")
    day = await stored(kv, day_key("pat"))
    assert list(leases(day)) == [other.ledger.lease_name]  # the dead one dropped by a write
    counted = day.input_tokens + day.output_tokens
    assert day.committed(time.time())[0] == counted + leases(day)[other.ledger.lease_name]


async def test_a_count_the_bucket_refuses_lands_once_it_takes_writes_again(kv: Any) -> None:
    watched = Watched(kv)
    spend = budget(watched)
    await step(spend, "r0")
    async with spend.step(Req("r1"), one_call(), part="frontline") as meter:
        meter.add(USED)
        watched.refusing = True  # held, called; then the store stops answering
    day = await stored(kv, day_key("pat"))
    assert day.counted == ["r0.frontline"] and "r1.frontline" in day.held
    await asyncio.sleep(0.5)  # tried again meanwhile, refused again
    watched.refusing = False
    for _ in range(100):
        day = await stored(kv, day_key("pat"))
        session = await stored(kv, session_key("pat", "pat/s1"))
        if "r1.frontline" in day.counted and "r1.frontline" in session.counted:
            break
        await asyncio.sleep(0.1)
    assert day.counted == ["r0.frontline", "r1.frontline"]
    assert (day.calls, day.input_tokens, day.held) == (2, 1200, {})
    assert (session.calls, session.counted, session.held) == (2, day.counted, {})


async def test_a_stopping_process_writes_its_counts_and_returns_its_lease(kv: Any) -> None:
    spend = budget(kv, budget_flush_seconds=60)
    for i in range(HOT_STEPS + 5):
        await step(spend, f"r{i}")
    async with spend.step(Req("inflight"), one_call(), part="frontline") as meter:
        meter.hand_on()  # goes on elsewhere: its hold must stay
    assert (await stored(kv, day_key("pat"))).calls < HOT_STEPS + 5  # batched, not written
    await spend.drain()
    day = await stored(kv, day_key("pat"))
    assert day.calls == HOT_STEPS + 5 and len(day.counted) == HOT_STEPS + 5
    assert leases(day) == {}
    assert day.held["inflight.frontline"].tokens == STEP  # now a per-step hold


async def test_near_the_limit_steps_are_held_one_by_one(kv: Any) -> None:
    spend = budget(kv, budget_daily_tokens=20 * STEP)  # less than four slices of eight steps
    for i in range(HOT_STEPS + 3):
        async with spend.step(Req(f"r{i}"), one_call(), part="frontline") as meter:
            day = await stored(kv, day_key("pat"))
            assert leases(day) == {} and f"r{i}.frontline" in day.held
            meter.add(USED)
    day = await stored(kv, day_key("pat"))
    assert (day.calls, day.held) == (HOT_STEPS + 3, {})


class Paused:
    """The bucket, with the next write of `key` held until `go` is set (`at`: it is held)."""

    def __init__(self, kv: Any, key: str) -> None:
        self.kv, self.key = kv, key
        self.armed = False
        self.at, self.go = asyncio.Event(), asyncio.Event()

    async def get(self, key: str) -> Any:
        return await self.kv.get(key)

    async def create(self, key: str, value: bytes) -> int:
        return int(await self.kv.create(key, value))

    async def update(self, key: str, value: bytes, last: int) -> int:
        if self.armed and key == self.key:
            self.armed = False
            self.at.set()
            await self.go.wait()
        return int(await self.kv.update(key, value, last=last))


async def test_a_lease_taken_while_a_count_ends_is_the_only_one_of_its_day(kv: Any) -> None:
    """The interleaving that let one principal's racing requests pass the day: a step count
    held one by one ends (its write in flight) while the first busy step waits to lease the
    day; the count, ending, must not drop the day's account the lease is taken in, or the
    next step leases again under the same name, replacing the first lease with its hold in
    flight, and together the steps hold more than the day has."""
    limit = 40 * STEP
    paused = Paused(kv, day_key("pat"))
    spend = budget(paused, budget_daily_tokens=limit)
    for i in range(HOT_STEPS - 1):  # not busy yet: held and counted step by step
        await step(spend, f"r{i}")
    last = spend.step(Req("last"), one_call(), part="frontline")
    meter = await last.__aenter__()  # the last step held one by one, its call made
    meter.add(USED)
    paused.armed = True
    counting = asyncio.create_task(last.__aexit__(None, None, None))
    await paused.at.wait()  # its count's write is on its way
    release = asyncio.Event()
    held: list[str] = []
    refused: list[OverBudget] = []

    async def in_flight(request_id: str, started: asyncio.Event) -> None:
        try:
            async with spend.step(Req(request_id), one_call(), part="frontline") as meter:
                held.append(request_id)
                started.set()
                await release.wait()
                meter.add(USED)
        except OverBudget as exc:
            refused.append(exc)
            started.set()

    first = asyncio.Event()
    calls = [asyncio.create_task(in_flight("busy0", first))]
    for _ in range(20):  # the first busy step reaches the day's turn, behind the count
        await asyncio.sleep(0)
    assert not first.is_set()
    paused.go.set()
    await counting
    await first.wait()
    assert held == ["busy0"] and leases(await stored(kv, day_key("pat")))  # a lease
    n = 1
    while not refused:  # more steps, each held while the others are, until one is refused
        started = asyncio.Event()
        calls.append(asyncio.create_task(in_flight(f"busy{n}", started)))
        await started.wait()
        n += 1
    day = await stored(kv, day_key("pat"))
    counted = day.input_tokens + day.output_tokens
    assert counted == HOT_STEPS * STEP
    # Every step in flight is reserved in the day (in a live lease or as its own hold), and
    # what is reserved stays within the limit: so are the steps in flight.
    reserved = day.committed(time.time())[0]
    assert counted + len(held) * STEP <= reserved <= limit, (len(held), day.held)
    assert "daily tokens" in refused[0].limit.note()
    release.set()
    await asyncio.gather(*calls)
    await asyncio.sleep(0.5)  # a flush interval and more
    day = await stored(kv, day_key("pat"))
    assert day.calls == HOT_STEPS + len(held)
    assert day.input_tokens + day.output_tokens <= limit


async def stall(spend: Budget) -> None:
    """The process stalls: its accounts' writers stop, each between two writes (at its key's
    turn: no write of the key is on its way), and nothing of it runs until it goes on."""
    for key, account in list(spend.ledger.accounts.items()):
        async with TURNS.turn(key):
            if account.task is not None:
                account.task.cancel()


async def test_a_lease_that_lapsed_while_its_process_stalled_takes_no_room_taken(
    kv: Any,
) -> None:
    """Process A leases a large slice of the day, then stalls past the lease's time; the day no
    longer counts the slice, and process B spends most of it. A's lapsed lease grants nothing,
    and A's next writes (the one its next step needs, its writer's) must not put the old slice
    back: the day's count plus every live lease and hold stays within the limit at every
    write."""
    limit = 200 * STEP
    watched = Watched(kv, limit)
    a = budget(watched, budget_daily_tokens=limit, budget_lease_seconds=1.0, budget_idle_seconds=60)
    b = budget(watched, budget_daily_tokens=limit)
    for i in range(40):  # busy: the lease grows with the rate, to more than the room left below
        await step(a, f"a{i}")
    for _ in range(100):  # the batch written: what is left of the lease is all unused
        day = await stored(kv, day_key("pat"))
        if day.calls == 40:
            break
        await asyncio.sleep(0.05)
    await stall(a)
    day = await stored(kv, day_key("pat"))
    lease = day.held[a.ledger.lease_name]
    counted = day.input_tokens + day.output_tokens
    assert counted == 40 * STEP and lease.tokens >= 40 * STEP, leases(day)
    await asyncio.sleep(max(lease.until - time.time(), 0) + 0.2)  # lapsed
    account = a.ledger.accounts[day_key("pat")]
    assert account.size[0] == lease.tokens and not account.fits(one_call())
    assert account.take("late.frontline", one_call(), 60, time.time()) is None
    # B spends all but 34 steps' room: not near the limit (four slices of eight steps), yet
    # less than A's old lease.
    big = limit - counted - 34 * STEP
    ask = Ask("frontline", 0, 0.0, big, big, 0.0)
    async with b.step(Req("b0", session_id="pat/s2"), ask, part="frontline") as meter:
        meter.add(Usage.of_call("m", big // 2, big - big // 2))
    day = await stored(kv, day_key("pat"))
    assert day.input_tokens + day.output_tokens == limit - 34 * STEP
    assert day.committed(time.time())[0] == limit - 34 * STEP  # A's slice no longer counts
    # A goes on: its writers renew its leases, then it takes a step.
    for account in list(a.ledger.accounts.values()):
        a.ledger.schedule(account)
    await asyncio.sleep(0.3)
    day = await stored(kv, day_key("pat"))
    assert watched.worst <= limit, (watched.worst, day.held)  # at every write
    assert 0 < leases(day)[a.ledger.lease_name] <= 34 * STEP
    await step(a, "late")
    await asyncio.sleep(0.5)  # its batch written
    day = await stored(kv, day_key("pat"))
    assert watched.worst <= limit, (watched.worst, day.held)
    assert day.committed(time.time())[0] <= limit
    assert day.calls == 42 and day.input_tokens + day.output_tokens == limit - 33 * STEP
    await a.drain()
    await b.drain()
    assert watched.worst <= limit
