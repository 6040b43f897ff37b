"""Helpers shared by the worker-kind tests: the fake model's scripts, in-process workers
against the fakes, and a System started with the workers' keys."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from faststream.nats import NatsBroker

from contracts import WorkerTask
from services.cli.bootstrap import run_bootstrap
from services.runtime.base.settings import LLMConfig, Settings
from services.runtime.bus.core import Bus
from services.runtime.bus.natslogin import Login
from services.runtime.llm import LLMClient
from services.workers.base import WorkerDeps
from tests.support.fakes.openai_server import FakeOpenAI, Script
from tests.support.harness import System, llm_env

ALL_KINDS = "GENERAL,SEARCH,RESEARCH,EMAIL"


def start_system(nats_url: str, fake_llm: FakeOpenAI, logs_dir: Path, **env: str) -> System:
    """The five services with the worker kinds' settings. Keys not given are set empty, so a
    key in the developer's environment can never reach a real API from a test."""
    full = {
        **llm_env(fake_llm.base_url),
        "SIDEKICK_WORKERS": ALL_KINDS,
        "BRAVE_SEARCH_API_KEY": "",
        "SENDGRID_API_KEY": "",
        "SENDGRID_FROM_EMAIL": "",
        "SIDEKICK_BRAVE_BASE_URL": "http://127.0.0.1:9",
        "SIDEKICK_SENDGRID_BASE_URL": "http://127.0.0.1:9",
        "SIDEKICK_FRESHNESS_TIMEOUT": "3",
        **env,
    }
    return System(nats_url, full, logs_dir).start_all()


def decide(kind: str, task: str, **parameters: str) -> Script:
    """The orchestrator's reply: this worker kind, with these parameters."""

    def script(body: dict[str, Any]) -> dict[str, Any]:
        return {
            "worker_type": kind,
            "task_description": task,
            "parameters": [{"name": k, "value": v} for k, v in parameters.items()],
            "success_criteria": "A correct answer that does what was asked.",
        }

    return script


def schema_of(body: dict[str, Any]) -> str | None:
    """Name of the structured output a model call asks for, if any."""
    fmt = body.get("response_format") or {}
    name = (fmt.get("json_schema") or {}).get("name")
    return str(name) if name else None


def by_schema(replies: dict[str | None, Callable[[dict[str, Any]], Any]]) -> Script:
    """A worker script answering each structured output (or plain text, key None) its way."""

    def script(body: dict[str, Any]) -> Any:
        return replies[schema_of(body)](body)

    return script


def worker_llm(fake_llm: FakeOpenAI) -> LLMClient:
    config = LLMConfig(
        role="worker", base_url=fake_llm.base_url, api_key="test-key", model="fake-worker"
    )
    return LLMClient(config, timeout=10, max_retries=0)


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


async def wait_for(predicate: Callable[[], Any], timeout: float = 30.0) -> None:
    """Wait until `predicate()` (sync or returning an awaitable) is truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met")
        await asyncio.sleep(0.05)


def decide_tools(task: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The orchestrator's script: TOOLS, with this task."""
    return lambda body: {
        "worker_type": "TOOLS",
        "task_description": task,
        "parameters": [],
        "success_criteria": "Does what the user asked, using the tools.",
    }


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool messages of a request the model got."""
    return [m for m in body["messages"] if m["role"] == "tool"]
