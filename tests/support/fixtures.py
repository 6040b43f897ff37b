"""Fixtures any test module may take (tests/conftest.py loads this module as a plugin).

The outside world's fakes: each a fresh server for the module that takes it, started before
its first test and stopped after its last (the one `sendgrid`, the one `pushover`, ...); what
one module scripts never reaches another's. Each test starts with the module's Brave, SendGrid
and Pushover as new (`_fresh_fakes`: nothing recorded, nothing scripted, nothing held). And
`own_nats`: a nats-server of the module's own, unlocked, which its tests may stop and start
again; `asking`: a system of the module's own whose email worker asks a person first
(`emails_asked`, tests/support/approvals.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest

from services.runtime.bus.natsserver import NatsServer
from tests.support.approvals import emails_asked
from tests.support.fakes.brave import FakeBrave
from tests.support.fakes.http import FakeServer
from tests.support.fakes.otlp import FakeOTLP
from tests.support.fakes.pages import PageServer
from tests.support.fakes.pushover import FakePushover
from tests.support.fakes.sendgrid import FakeSendGrid
from tests.support.fakes.site import FakeSite
from tests.support.fakes.wikipedia import FakeWikipedia
from tests.support.harness import System
from tests.support.systems import Systems

S = TypeVar("S", bound=FakeServer)


def served(make: Callable[[], S]) -> Callable[[], Iterator[S]]:
    """A module-scoped fixture serving `make()`; the fixture's name is the name it is bound to."""

    def serve() -> Iterator[S]:
        with make() as fake:
            yield fake

    serve.__doc__ = f"A {make.__name__} of the module's own."
    return pytest.fixture(serve, scope="module")


brave = served(FakeBrave)
sendgrid = served(FakeSendGrid)
pages = served(PageServer)
pushover = served(FakePushover)
wiki = served(FakeWikipedia)
site = served(FakeSite)
otlp = served(FakeOTLP)


@pytest.fixture(autouse=True)
def _fresh_fakes(request: pytest.FixtureRequest) -> None:
    for name in ("brave", "sendgrid", "pushover"):
        if name in request.fixturenames:
            fake: FakeServer = request.getfixturevalue(name)
            fake.reset()


@pytest.fixture(scope="module")
def own_nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    server = NatsServer(store_dir=tmp_path_factory.mktemp("own-js")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def asking(systems: Systems, sendgrid: FakeSendGrid) -> Iterator[System]:
    """The system (tokens required) whose email worker asks before it sends through the
    module's `sendgrid`, under the default policy."""
    yield from emails_asked(systems, sendgrid)


@pytest.fixture
def bare_llm_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """`monkeypatch`, with the shared SIDEKICK_LLM_BASE_URL, _API_KEY and _MODEL unset: a
    settings test sets what it reads, whatever the developer's shell holds."""
    for name in ("SIDEKICK_LLM_BASE_URL", "SIDEKICK_LLM_API_KEY", "SIDEKICK_LLM_MODEL"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch
