"""Fixtures the A2A tests share: an HTTP client of the module's system, a client's webhook, and
a system whose gateway may POST to it (the egress wall lets that one loopback address through).
A module that defines its own `http` uses that instead."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from services.runtime.bus.natsserver import NatsServer
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.fakes.webhook import Webhook
from tests.support.gateway_client import tokens_env
from tests.support.harness import System, llm_env


@pytest.fixture
async def http(system: System) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=system.http_url, timeout=90) as client:
        yield client


@pytest.fixture(scope="module")
def webhook() -> Iterator[Webhook]:
    with Webhook() as hook:
        yield hook


@pytest.fixture(scope="module")
def push_system(
    nats_server: NatsServer, fake_llm: FakeOpenAI, logs_dir: Path, webhook: Webhook
) -> Iterator[System]:
    env = {
        **llm_env(fake_llm.base_url),
        "SIDEKICK_AUTH_TOKENS": tokens_env(),
        "SIDEKICK_EGRESS_ALLOW": webhook.host_port,
    }
    with System(nats_server.url, env, logs_dir).start_all() as sys_:
        yield sys_
