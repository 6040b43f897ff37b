"""Helpers shared by the worker-kind tests: a system with every kind, in-process workers against
the fakes (their model client, settings and dependencies, with or without a bus), a task, and
waiting on a condition."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from faststream.nats import NatsBroker

from contracts import WorkerTask
from services.cli.bootstrap import run_bootstrap
from services.runtime.base.settings import Settings
from services.runtime.bus.core import Bus
from services.runtime.bus.natslogin import Login
from services.runtime.llm import LLMClient
from services.workers.base import WorkerDeps
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.harness import System
from tests.support.systems import Systems

ALL_KINDS = "GENERAL,SEARCH,RESEARCH,EMAIL"


def every_kind(systems: Systems, **options: Any) -> Iterator[System]:
    """The five services with the worker kinds' settings and no provider key but those
    `options` give (`Systems.run`'s)."""
    return systems.run(keyless=True, workers=ALL_KINDS, SIDEKICK_FRESHNESS_TIMEOUT="3", **options)


def worker_llm(fake_llm: FakeOpenAI) -> LLMClient:
    return fake_llm.client("worker", "fake-worker")


def local_settings(
    nats_url: str = "nats://127.0.0.1:9", namespace: str = "unused", egress_allow: str = ""
) -> Settings:
    return Settings(
        nats_url=nats_url,
        namespace=namespace,
        ack_wait=5,
        heartbeat_interval=1,
        egress_allow=egress_allow,
    )


def unconnected_deps(fake_llm: FakeOpenAI, egress_allow: str = "") -> WorkerDeps:
    """For kinds that never touch the bus (SEARCH, RESEARCH). `egress_allow`: the local fakes
    the egress check lets through (SIDEKICK_EGRESS_ALLOW)."""
    settings = local_settings(egress_allow=egress_allow)
    return WorkerDeps(
        bus=Bus(NatsBroker(settings.nats_url), settings, "test"),
        settings=settings,
        llm=worker_llm(fake_llm),
    )


async def connected_deps(fake_llm: FakeOpenAI, nats_url: str, namespace: str) -> WorkerDeps:
    """A workers' bus on a fresh namespace, after the bootstrap step (run as `nats_url`'s user,
    the test server's admin)."""
    settings = local_settings(nats_url, namespace)
    await run_bootstrap(Login.from_env(nats_url, {}), settings)
    bus = Bus(NatsBroker(nats_url), settings, "workers")
    await bus.setup(wait=10)
    return WorkerDeps(bus=bus, settings=settings, llm=worker_llm(fake_llm))


def task(kind: str, description: str, request_id: str = "r1", **parameters: str) -> WorkerTask:
    return WorkerTask(
        request_id=request_id,
        session_id="anonymous/s1",
        attempt=1,
        worker_type=kind,
        message=description,
        task_description=description,
        parameters=parameters,
        success_criteria="A correct answer.",
    )
