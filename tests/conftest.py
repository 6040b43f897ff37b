"""Session fixtures: a real nats-server (JetStream in a temp dir, port chosen by the server,
one NATS user per service per system, as `sidekick up` runs it), a fake OpenAI-compatible API,
the factory every test starts its system with (`systems`, tests/support/systems.py), and two
shared systems of the five services as separate processes (`system`, `secure_system`).

Two tiers: tests marked `fast` run in memory, with no process started (`python -m pytest -m
fast`); the rest use the real nats-server, service processes and the browser. A test taking the
`kv` fixture (a JetStream KV bucket) runs its body on both: on tests/support/memory.py's bucket
(`fast`) and on the real server's, so the memory one is held to the server's behaviour.

The fakes a module takes for itself (Brave, SendGrid, Pushover, ...) and a nats-server of its
own are in tests/support/fixtures.py."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from nats.aio.client import Client as NATS
from nats.js.api import KeyValueConfig

from contracts import new_id
from services.runtime.bus.natsserver import NatsServer
from services.runtime.llm import transport
from tests.support.fakes.brave import FakeBrave
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.harness import System
from tests.support.lockednats import LockedNats
from tests.support.memory import MemoryStore
from tests.support.systems import Systems

pytest_plugins = ["tests.support.fixtures", "tests.support.realmodel"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "fast: in memory, no processes (pytest -m fast)")
    config.addinivalue_line(
        "markers",
        "real_model: against the tiny local model's real server (the `local` extra; "
        "pytest -m real_model)",
    )


@pytest.fixture(scope="session", autouse=True)
async def _close_model_http() -> AsyncIterator[None]:
    """Model clients made in the test process share one HTTP session; closed at the end."""
    yield
    await transport.close()


@pytest.fixture(params=[pytest.param("memory", marks=pytest.mark.fast), "nats"])
async def kv(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """A fresh KV bucket, in memory or on the real server (same API, same revisions): a test
    taking it runs twice, `[memory]` in the fast tier."""
    if request.param == "memory":
        yield MemoryStore().bucket("test")
        return
    server: NatsServer = request.getfixturevalue("nats_server")
    client = NATS()
    await client.connect(server.url)
    js = client.jetstream()
    name = "kv_" + new_id()[:12]
    yield await js.create_key_value(KeyValueConfig(bucket=name))
    await js.delete_key_value(name)
    await client.close()


@pytest.fixture(scope="session")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    """Locked like `sidekick up`'s: each System's services get users with only their roles'
    rights; `url` is the admin's (tests/support/lockednats.py)."""
    store = tmp_path_factory.mktemp("jetstream")
    server = LockedNats(store_dir=store, config_file=store / "nats.conf").start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def fake_llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(autouse=True)
def _reset_fake_llm(fake_llm: FakeOpenAI) -> None:
    fake_llm.reset()


@pytest.fixture(scope="session")
def fake_brave() -> Iterator[FakeBrave]:
    """Brave Search for the shared systems: workflows run the research pipeline."""
    with FakeBrave() as fake:
        yield fake


@pytest.fixture(scope="session")
def logs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("service-logs")


@pytest.fixture(scope="session")
def systems(nats_server: NatsServer, fake_llm: FakeOpenAI, logs_dir: Path) -> Systems:
    return Systems(nats_server.url, fake_llm, logs_dir)


@pytest.fixture(scope="session")
def system(systems: Systems, fake_brave: FakeBrave) -> Iterator[System]:
    """One system shared by the end-to-end tests (each test uses its own session uuid)."""
    yield from systems.run(brave=fake_brave)


@pytest.fixture
async def nc(nats_server: NatsServer) -> AsyncIterator[NATS]:
    client = NATS()
    await client.connect(nats_server.url)
    yield client
    await client.close()


@pytest.fixture(scope="session")
def secure_system(systems: Systems, fake_brave: FakeBrave) -> Iterator[System]:
    """A system whose gateway requires tokens (one per principal of tests/support/gateway_client.py)
    and has small limits: 5 requests a minute and 2 in flight per principal, 500-char messages.
    Each gateway test uses principals of its own, so the limits of one never touch another."""
    yield from systems.run(
        brave=fake_brave,
        auth=True,
        SIDEKICK_CORS_ORIGINS="http://localhost:5173",
        SIDEKICK_RATE_LIMIT_PER_MINUTE="5",
        SIDEKICK_MAX_CONCURRENT_REQUESTS="2",
        SIDEKICK_MAX_MESSAGE_CHARS="500",
    )
