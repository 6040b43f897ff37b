"""The gateway's /readyz is ready only when every service has answered a ping over the bus and
every consumer the system needs is taken; `?scope=self` asks only the gateway process."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

from tests.support.harness import System
from tests.support.systems import Systems


def readyz(system: System, query: str = "") -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"{system.http_url}/readyz{query}", timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())
    except OSError:
        return 0, {}


def until(system: System, want: list[str], timeout: float = 90) -> dict[str, Any]:
    """Poll /readyz until it waits for exactly `want` (every other service answered)."""
    deadline = time.monotonic() + timeout
    while True:
        status, body = readyz(system)
        if status and body.get("waiting_for") == want:
            assert status == (200 if not want else 503), body
            return body
        assert time.monotonic() < deadline, (body, system.logs_tail())
        time.sleep(0.2)


def test_readyz_waits_for_every_service_and_says_which_is_missing(systems: Systems) -> None:
    # Started one service at a time, not by `Systems.run`: each step is looked at.
    system = System(systems.nats_url, systems.env(), systems.logs)
    system.service_urls = system.logins()
    system.bootstrap()
    try:
        for name in ("gateway", "frontline", "orchestrator", "workers"):
            system.launch(name)
        body = until(system, ["evaluator"])
        assert body["services"]["evaluator"] == {"ready": False, "replicas": 0, "metrics_urls": []}
        assert body["services"]["frontline"]["ready"] is True
        # The gateway process itself is fine: Kubernetes keeps it in its Service.
        assert readyz(system, "?scope=self")[0] == 200

        system.launch("evaluator")
        body = until(system, [])
        assert all(s["replicas"] == 1 for s in body["services"].values())

        system.kill("workers")
        until(system, ["workers"])
    finally:
        system.stop()


def test_a_worker_kind_nobody_consumes_keeps_the_system_unready() -> None:
    from faststream.nats import NatsBroker

    from contracts.health import Pong
    from services.runtime.base.settings import Settings
    from services.runtime.bus.core import Bus
    from services.runtime.hosting.health import Probe, needed_subjects

    settings = Settings(namespace="rdy", workers="GENERAL,SEARCH")
    bus = Bus(NatsBroker(), settings, "gateway")
    needed = needed_subjects(bus)
    search = bus.subjects.worker_run("search")
    assert needed[search] == "workers"
    assert bus.subjects.worker_run("email") not in needed  # not a kind this system runs

    def pong(service: str, subjects: list[str]) -> Pong:
        return Pong(ping_id="p", service=service, instance="h:1", ready=True, subjects=subjects)

    answers = [
        pong(service, [s for s, who in needed.items() if who == service])
        for service in ("frontline", "orchestrator", "evaluator")
    ]
    answers.append(pong("workers", [bus.subjects.worker_run("general")]))  # --kinds general
    report = Probe(bus).judge(answers)
    assert not report.ready
    assert report.waiting_for == [f"workers: {search}"]
    answers.append(pong("workers", [search]))  # a second replica takes search
    assert Probe(bus).judge(answers).ready
