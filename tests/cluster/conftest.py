"""What the cluster tests share: a nats-server of the test's own with the evaluator alone on it
(its bus about to be lost or hung), and the admin on the nodes a test keeps up."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from nats.aio.client import Client as NATS

from services.runtime.bus.natsserver import NatsServer
from tests.support.harness import System, http_get
from tests.support.natscluster import NatsCluster
from tests.support.systems import Systems


@pytest.fixture
def lone_nats(tmp_path: Path) -> Iterator[NatsServer]:
    """A nats-server of the test's own, unlocked; stopped after (woken first, if it was frozen)."""
    server = NatsServer(store_dir=tmp_path / "js").start()
    yield server
    if server.process is not None and server.process.poll() is None:
        server.process.send_signal(signal.SIGCONT)  # whatever the test did to it
    server.stop()


@pytest.fixture
def lone_evaluator(lone_nats: NatsServer, systems: Systems) -> Iterator[System]:
    """The evaluator alone on `lone_nats`, told to exit once its bus is gone for 4 s; healthy
    when the test begins."""
    with systems.start(
        nats_url=lone_nats.url, services=("evaluator",), SIDEKICK_NATS_LOST_EXIT_AFTER="4"
    ) as system:
        assert http_get(system.ops_url("evaluator") + "/healthz")[0] == 200
        yield system


@pytest.fixture
async def admin(cluster: NatsCluster) -> AsyncIterator[NATS]:
    """The admin on the nodes after the first (it reads the results stream while n0 is down)."""
    async with cluster.admin(cluster.nodes[1:]) as nc:
        yield nc
