"""A gateway catches up after its NATS connection comes back (services/gateway/catchup.py), on a
3-node cluster whose nodes do not announce each other to clients: the gateway is given the first
node only, every other service the other two. A request's worker is held; the gateway's node is
killed; the held answer goes on, so the request's end is published and stored while the gateway
cannot hear it; the node comes back. The client, still on the gateway's WebSocket, gets that end
exactly once."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from nats.aio.client import Client as NATS

from services.runtime.bus.core import OUTAGE_ERRORS
from tests.support.fakes.openai_server import FakeOpenAI, Reply, last_user, verdict
from tests.support.harness import Client, llm_env
from tests.support.natscluster import ClusterSystem, NatsCluster, finals_by_request

pytestmark = pytest.mark.timeout(400)

NAMESPACE = "catchup"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsCluster]:
    nodes = NatsCluster(tmp_path_factory.mktemp("catchup"), NAMESPACE, advertise=False)
    yield nodes.start()
    nodes.stop()


@pytest.fixture(scope="module")
def split(cluster: NatsCluster, fake_llm: FakeOpenAI, logs_dir: Path) -> Iterator[ClusterSystem]:
    """The gateway on node n0 only; every other service on n1 and n2."""
    env = {
        **llm_env(fake_llm.base_url),
        "SIDEKICK_WORKERS": "GENERAL",
        "SIDEKICK_LLM_TIMEOUT": "60",
        "SIDEKICK_MAX_DELIVER": "20",
    }
    others = ",".join(n.url for n in cluster.nodes[1:])
    system = ClusterSystem(
        others, env, logs_dir, namespace=NAMESPACE, service_urls={"gateway": cluster.nodes[0].url}
    )
    system.cluster = cluster
    with system.start_all():
        yield system


@pytest.fixture
async def admin(cluster: NatsCluster) -> AsyncIterator[NATS]:
    """The admin on n1 and n2 (it reads the results stream while n0 is down)."""
    nc = NATS()

    async def quiet(_: Exception) -> None:
        pass

    await nc.connect(
        servers=[n.url for n in cluster.nodes[1:]],
        user="admin",
        password=cluster.creds.passwords["admin"],
        max_reconnect_attempts=-1,
        reconnect_time_wait=1,
        error_cb=quiet,
    )
    yield nc
    await nc.close()


def script(fake: FakeOpenAI, hold: threading.Event) -> None:
    """Routed to one GENERAL worker, whose answer waits for `hold` when the message says so."""
    fake.script(
        "fake-frontline",
        lambda body: Reply(json.dumps({"route_to_orchestrator": True, "reason": "work"})),
    )
    fake.script(
        "fake-orchestrator",
        lambda body: Reply(
            json.dumps(
                {
                    "worker_type": "GENERAL",
                    "task_description": "answer the question",
                    "parameters": [],
                    "success_criteria": "an answer",
                }
            )
        ),
    )

    def worker(body: dict[str, Any]) -> Reply:
        held = "held" in json.dumps(body)
        return Reply("Answer to: " + last_user(body)[:40], wait=hold if held else None)

    fake.script("fake-worker", worker)
    fake.script("fake-evaluator", lambda body: Reply(json.dumps(verdict(True, 90, "ok"))))


async def until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        await asyncio.sleep(0.2)


async def stored(admin: NATS, request_id: str, timeout: float) -> int:
    """How many ends the results stream holds for the request, once it holds one (the stream
    may be between leaders for a while after a node is killed)."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(*OUTAGE_ERRORS):
            ends = (await finals_by_request(admin, NAMESPACE))[request_id]
            if ends or time.monotonic() > deadline:
                return ends
        if time.monotonic() > deadline:
            return 0
        await asyncio.sleep(0.5)


async def ask(client: Client, text: str) -> str:
    """Send `text`; the request id its ack names."""
    await client.send({"uuid": client.uuid, "message": text})
    while (frame := await client.recv(30)).get("event") != "ack":
        pass
    return str(frame["request_id"])


async def frames_until_end_of(
    client: Client, request_id: str, timeout: float
) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while True:
        frame = await client.recv(max(deadline - time.monotonic(), 0.01))
        frames.append(frame)
        if "on_chat_model_end" in frame and frame.get("request_id") == request_id:
            return frames


async def test_an_end_published_while_the_gateway_reconnects_reaches_its_socket_once(
    split: ClusterSystem, cluster: NatsCluster, fake_llm: FakeOpenAI, admin: NATS
) -> None:
    on = cluster.connected()
    assert on.get("gateway") == "n0" and len(on) == 5, on
    assert all(node != "n0" for name, node in on.items() if name != "gateway"), on
    hold = threading.Event()
    script(fake_llm, hold)
    n0 = cluster.nodes[0]
    try:
        async with Client(split.ws_url, events=True) as client:
            first = await ask(client, "a held question")
            await until(lambda: len(fake_llm.chat_calls("fake-worker")) >= 1, 60, "no worker")

            n0.kill()
            hold.set()  # the request ends while the gateway has no server to hear it on
            assert await stored(admin, first, 60) == 1, "the end was not stored while n0 was down"
            assert "gateway" not in cluster.connected(), "the gateway moved to another node"

            n0.start()
            await asyncio.to_thread(cluster.wait_healthy, 60)
            try:
                frames = await frames_until_end_of(client, first, 60)
            except TimeoutError:
                raise AssertionError("no end reached the socket after n0 came back") from None
            # A second request on the same socket: anything the catch-up repeated for the
            # first would come before this one's end.
            second = await ask(client, "a quick question")
            frames += await frames_until_end_of(client, second, 60)
    finally:
        hold.set()
    first_ends = [f for f in frames if "on_chat_model_end" in f and f.get("request_id") == first]
    assert len(first_ends) == 1, frames
    assert first_ends[0]["status"] == "completed", first_ends
    assert "Traceback" not in split.log("gateway"), split.log("gateway")[-3000:]
