"""Replicas lose nothing (issue 25): three processes of every service and three gateways on
one nats-server, the clients spread over the gateways, under a mixed concurrent load (retries,
clarifications, cancels, emails, small talk). Every request ends exactly once, on its client
and on the bus, and every email is sent once; then one replica of each service is SIGKILLed
with requests held in flight, and the same holds.

Before the fix in services/runtime/bus/kvstore.py, an event handled by one orchestrator replica
against its stale copy of a request's state (another replica had moved it on) was taken for a
duplicate and dropped: its request never ended."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from nats.aio.client import Client as NATS

from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.fakes.sendgrid import FakeSendGrid
from tests.support.harness import System
from tests.support.natscluster import finals_by_request
from tests.support.probe import Probe
from tests.support.replicas import FINAL, Tally, run_sessions, script
from tests.support.systems import Systems, sending_freely

REPLICAS = 3
SESSIONS = 100
REQUESTS_EACH = 10  # 1,000 requests
# Seconds the 1,000 get to end: a few times what they take on a busy 2-core machine (before the
# fix, hung requests never end and the test fails at this bound, naming them).
BUDGET = 420


@pytest.fixture(scope="module")
def replicated(systems: Systems, sendgrid: FakeSendGrid) -> Iterator[System]:
    yield from sending_freely(
        systems,
        sendgrid,
        timeout=180,
        replicas=REPLICAS,
        gateways=REPLICAS,
        SIDEKICK_LLM_TIMEOUT="60",
    )


@pytest.fixture
async def probe(nc: NATS, replicated: System) -> AsyncIterator[Probe]:
    async with Probe(nc, replicated.namespace) as probe:
        yield probe


async def check_every_request_ended_once(
    tally: Tally, nc: NATS, system: System, mails: list[dict[str, Any]], prefix: str, probe: Probe
) -> dict[str, object]:
    """`mails`: what the fake SendGrid got during this load."""
    assert not tally.stuck, (
        f"{len(tally.stuck)} of {len(tally.kinds)} requests never ended, e.g. {tally.stuck[:5]}"
        f" (sockets lost: {dict(tally.lost_sockets)})"
    )
    twice = {rid: seen for rid, seen in tally.ends.items() if len(seen) != 1}
    assert not twice, f"requests that did not end exactly once on their socket: {twice}"
    finals = await finals_by_request(nc, system.namespace, prefix)
    assert set(finals) == set(tally.kinds), "every request has a terminal event on the bus"
    assert all(n == 1 for n in finals.values()), f"duplicates: {finals.most_common(3)}"
    records = Counter([(await probe.status(rid)).status for rid in tally.kinds])
    assert set(records) <= set(FINAL), records
    sends = Counter(m["personalizations"][0]["to"][0]["email"] for m in mails)
    assert all(n == 1 for n in sends.values()), f"emails sent twice: {sends.most_common(3)}"
    emails = [rid for rid, kind in tally.kinds.items() if kind == "email"]
    sent_for = {rid for rid in emails if tally.ends[rid] == ["completed"]}
    assert len(sends) == len(sent_for), (len(sends), len(sent_for))
    return {"ends": dict(tally.statuses()), "records": dict(records), "emails": len(sends)}


@pytest.mark.timeout(600)
async def test_with_three_replicas_of_everything_a_thousand_requests_each_end_exactly_once(
    replicated: System, fake_llm: FakeOpenAI, sendgrid: FakeSendGrid, nc: NATS, probe: Probe
) -> None:
    script(fake_llm, pace=0.05)
    mailed = len(sendgrid.mails)
    tally = Tally()
    began = time.monotonic()
    await run_sessions(replicated.gateway_urls, SESSIONS, REQUESTS_EACH, tally, "load", BUDGET)
    took = time.monotonic() - began
    mails = sendgrid.mails[mailed:]
    figures = await check_every_request_ended_once(tally, nc, replicated, mails, "load", probe)
    assert len(tally.kinds) == SESSIONS * REQUESTS_EACH, "every session sent all its requests"
    kinds = Counter(tally.kinds.values())
    assert kinds["cancel"] and kinds["ask"] and kinds["email"] and kinds["fail"], kinds
    retried = sum(1 for c in fake_llm.chat_calls("fake-evaluator") if "(revised)" in str(c))
    assert retried >= kinds["fail"] // 2, "failed verdicts were retried"
    print(f"\n{len(tally.kinds)} requests in {took:.1f}s: {figures}")
    quiet = [n for n in replicated.procs if "Traceback" in replicated.log(n)]
    assert not quiet, f"tracebacks in {quiet}:\n{replicated.logs_tail()}"


async def test_a_replica_of_each_service_sigkilled_mid_request_loses_nothing(
    replicated: System, fake_llm: FakeOpenAI, sendgrid: FakeSendGrid, nc: NATS, probe: Probe
) -> None:
    hold = threading.Event()
    script(fake_llm, hold=hold)
    mailed = len(sendgrid.mails)
    tally = Tally()
    urls = replicated.gateway_urls
    load = asyncio.create_task(run_sessions(urls, 30, 2, tally, "kill", budget=150))

    def held() -> int:
        return len(fake_llm.chat_calls("fake-worker"))

    deadline = time.monotonic() + 60
    while held() < 20:  # requests are at the workers, held there
        assert time.monotonic() < deadline, f"only {held()} requests reached the workers"
        await asyncio.sleep(0.1)
    victims = [f"{s}.2" for s in ("orchestrator", "workers", "evaluator", "frontline")]
    for name in victims:
        replicated.kill(name)
    hold.set()  # the rest of the replicas take over what the dead ones held
    try:
        await load
    finally:
        for name in victims:
            await asyncio.to_thread(replicated.restart, name)
    mails = sendgrid.mails[mailed:]
    figures = await check_every_request_ended_once(tally, nc, replicated, mails, "kill", probe)
    print(f"\nafter SIGKILL of {victims}: {figures}")
