"""The promise under faults: a bounded flow of requests (at least 50 in flight) while each
service is SIGKILLed once at a random moment and restarted, and nats-server itself restarts
(file storage). Every acknowledged request must reach exactly one terminal state, and no email
may be sent twice. The figures are printed and written to tests/artifacts/fault_report.json."""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from nats.aio.client import Client as NATS

from contracts import FINAL_STATUSES
from services.runtime.bus.natsserver import NatsServer
from tests.support.fakes.openai_server import FakeOpenAI, Reply
from tests.support.fakes.sendgrid import FakeSendGrid
from tests.support.harness import ROOT, System
from tests.support.natscluster import finals_by_request
from tests.support.probe import Probe
from tests.support.scripts import decision, emailing, last_user, verdict
from tests.support.systems import Systems, sending_freely

REQUESTS = 60
EMAIL_EVERY = 4  # every 4th request sends an email
SERVICE_ORDER = ["orchestrator", "workers", "evaluator", "frontline", "gateway"]


@pytest.fixture(scope="module")
def faulty(systems: Systems, own_nats: NatsServer, sendgrid: FakeSendGrid) -> Iterator[System]:
    yield from sending_freely(
        systems,
        sendgrid,
        nats_url=own_nats.url,
        SIDEKICK_MAX_DELIVER="20",
        SIDEKICK_ACK_WAIT="4",
        SIDEKICK_LLM_MAX_RETRIES="3",
        SIDEKICK_LLM_TIMEOUT="90",  # model calls are held until the faults are over
    )


def script(fake: FakeOpenAI, hold: threading.Event) -> None:
    """Every worker model call waits for `hold`, so all requests are in flight at every fault."""

    def frontline(body: dict[str, Any]) -> Any:
        return Reply(json.dumps({"route_to_orchestrator": True, "reason": "work"}), delay=0.05)

    def orchestrator(body: dict[str, Any]) -> Any:
        text = last_user(body)
        chosen = emailing(text, "user{n}@example.com") or decision(
            "GENERAL", text.split("\n")[1], "an answer"
        )
        return Reply(json.dumps(chosen), delay=0.1)

    def worker(body: dict[str, Any]) -> Any:
        if body.get("response_format"):
            draft = {"subject": "Report", "body": "Hello, it is ready. Bye"}
            return Reply(json.dumps(draft), delay=0.1, wait=hold)
        return Reply("Answer to: " + last_user(body).split("\n")[0], delay=0.2, wait=hold)

    fake.script("fake-frontline", frontline)
    fake.script("fake-orchestrator", orchestrator)
    fake.script("fake-worker", worker)
    fake.script("fake-evaluator", lambda b: Reply(json.dumps(verdict(True, 90, "ok")), delay=0.2))


@pytest.fixture
async def nc_own(own_nats: NatsServer) -> AsyncIterator[NATS]:
    client = NATS()
    await client.connect(own_nats.url, max_reconnect_attempts=-1, reconnect_time_wait=1)
    yield client
    await client.close()


async def test_every_acknowledged_request_ends_once_through_kills_and_a_nats_restart(
    faulty: System,
    own_nats: NatsServer,
    fake_llm: FakeOpenAI,
    sendgrid: FakeSendGrid,
    nc_own: NATS,
) -> None:
    hold = threading.Event()
    script(fake_llm, hold)
    rng = random.Random(7)
    probe = await Probe(nc_own, faulty.namespace).start()
    acknowledged: list[str] = []
    faults: list[dict[str, Any]] = []
    marks: dict[str, float] = {}

    def in_flight() -> int:
        return sum(1 for r in acknowledged if not _ended(probe, r))

    async def submit() -> None:
        for i in range(REQUESTS):
            text = f"do task #{i} please" if i % EMAIL_EVERY else f"email report #{i} please"
            for _ in range(100):  # the server may be restarting: retry until acknowledged
                try:
                    acknowledged.append(await probe.ask(text, request_id=f"fault-{i}"))
                    break
                except Exception:
                    await asyncio.sleep(0.1)
            await asyncio.sleep(0.01)

    async def all_ready(timeout: float = 60) -> float:
        began = time.monotonic()
        while not all([await asyncio.to_thread(_ready, faulty, n) for n in SERVICE_ORDER]):
            assert time.monotonic() - began < timeout, "services did not reconnect"
            await asyncio.sleep(0.05)
        return time.monotonic() - began

    async def restart(name: str, fault: dict[str, Any]) -> None:
        began = time.monotonic()
        await asyncio.to_thread(faulty.restart, name)
        fault["recovered_s"] = round(time.monotonic() - began, 2)

    async def inject() -> None:
        # Every request is accepted and held at the worker's model call; then each service is
        # SIGKILLed once at a random moment and restarted, then nats-server restarts.
        while len(acknowledged) < REQUESTS:  # noqa: ASYNC110 - a plain list, filled by submit()
            await asyncio.sleep(0.05)
        restarts = []
        for name in SERVICE_ORDER:
            await asyncio.sleep(rng.uniform(0.1, 0.5))
            fault = {"fault": f"SIGKILL {name}", "in_flight": in_flight()}
            faults.append(fault)
            faulty.kill(name)
            restarts.append(asyncio.create_task(restart(name, fault)))
        await asyncio.gather(*restarts)
        await asyncio.sleep(rng.uniform(0.1, 0.5))
        fault = {"fault": "restart nats-server", "in_flight": in_flight()}
        faults.append(fault)
        port = own_nats.port
        own_nats.stop()
        own_nats.port = port
        await asyncio.to_thread(own_nats.start)
        fault["recovered_s"] = round(await all_ready(), 2)
        marks["released"] = time.monotonic()
        hold.set()  # the model answers again: everything drains

    started = time.monotonic()
    await asyncio.gather(submit(), inject())
    deadline = time.monotonic() + 240
    while True:
        try:
            statuses = [await probe.status(r) for r in acknowledged]
        except Exception:
            statuses = []
        if statuses and all(s.status in FINAL_STATUSES for s in statuses):
            break
        assert time.monotonic() < deadline, (
            f"{sum(s.status not in FINAL_STATUSES for s in statuses)} requests never ended\n"
            + faulty.logs_tail()
        )
        await asyncio.sleep(0.25)
    finished = time.monotonic()
    await probe.stop()

    finals = await finals_by_request(nc_own, faulty.namespace)
    outcomes = Counter(s.status for s in statuses)
    sends = Counter(m["personalizations"][0]["to"][0]["email"] for m in sendgrid.mails)
    report = {
        "acknowledged": len(acknowledged),
        "outcomes": dict(outcomes),
        "duplicates": sum(n - 1 for n in finals.values() if n > 1),
        "emails_sent": sum(sends.values()),
        "emails_sent_twice": [k for k, n in sends.items() if n > 1],
        "faults": faults,
        "drain_after_faults_s": round(finished - marks["released"], 1),
        "wall_s": round(finished - started, 1),
    }
    artifacts = ROOT / "tests" / "artifacts"
    artifacts.mkdir(exist_ok=True)
    (artifacts / "fault_report.json").write_text(json.dumps(report, indent=2))
    print("\nfault suite:", json.dumps(report, indent=2))

    assert len(acknowledged) == REQUESTS
    assert min(f["in_flight"] for f in faults) >= 50, faults
    assert set(finals) == set(acknowledged), "every request has a terminal event"
    assert all(n == 1 for n in finals.values()), f"duplicates: {finals.most_common(3)}"
    assert not report["emails_sent_twice"]
    assert outcomes["completed"] >= REQUESTS * 0.9, outcomes


def _ended(probe: Probe, request_id: str) -> bool:
    kinds = probe.kinds(request_id)
    return any(k in kinds for k in ("request.completed", "request.failed", "request.cancelled"))


def _ready(system: System, name: str) -> bool:
    """/readyz of one service: 200 once it is connected to NATS."""
    url = system.metrics_url(name).replace("/metrics", "/readyz")
    try:
        with urllib.request.urlopen(url, timeout=1) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False
