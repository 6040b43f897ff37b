"""A 3-node NATS cluster loses a node under load, through the public WebSocket API: the node
every service is connected to, the stream leader, the meta leader, all three in a rolling
restart, and one kept down longer than SIDEKICK_NATS_LOST_EXIT_AFTER. Each time, with 30 routed
requests in flight (every 5th sends an email) and one request parked on a clarification: every
request ends exactly once, every email is sent once, the parked request can still be answered,
no service logs a traceback, and the gateway's /readyz is 200 again. The times to recover are
printed and written to tests/artifacts/cluster_report.json.

One cluster and one system serve every test (in file order). The services are given only the
first node's URL: its loss is the worst case, where every other server is one the cluster
announced, and the client must log in to it with the service's own user (given apart from the
URL) or not at all."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from nats.aio.client import Client as NATS

from contracts import Subjects
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.fakes.sendgrid import FakeSendGrid
from tests.support.harness import ROOT, Client, System
from tests.support.natscluster import (
    ClusterSystem,
    NatsCluster,
    Node,
    load_script,
    send_until_taken,
    stored_ends,
)
from tests.support.systems import Systems, on_first_node

REQUESTS = 30
EMAIL_EVERY = 5
NODE_DOWN = 2.5  # seconds a killed node stays down (the trial)
LOST_EXIT_AFTER = 6  # SIDEKICK_NATS_LOST_EXIT_AFTER in this system
REPORT: dict[str, Any] = {}

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsCluster]:
    nodes = NatsCluster(tmp_path_factory.mktemp("cluster"), namespace="clustered").start()
    yield nodes
    nodes.stop()
    artifacts = ROOT / "tests" / "artifacts"
    artifacts.mkdir(exist_ok=True)
    (artifacts / "cluster_report.json").write_text(json.dumps(REPORT, indent=2))
    print("\ncluster faults:", json.dumps(REPORT, indent=2))


@pytest.fixture(scope="module")
def clustered(systems: Systems, cluster: NatsCluster, sendgrid: FakeSendGrid) -> Iterator[System]:
    yield from on_first_node(
        systems,
        cluster,
        sendgrid,
        "clustered",
        SIDEKICK_LLM_MAX_RETRIES="3",
        SIDEKICK_NATS_LOST_EXIT_AFTER=str(LOST_EXIT_AFTER),
    )


@pytest.fixture
async def admin(cluster: NatsCluster) -> AsyncIterator[NATS]:
    async with cluster.admin() as nc:
        yield nc


def readyz(system: ClusterSystem) -> int:
    try:
        with urllib.request.urlopen(f"{system.http_url}/readyz", timeout=3) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return 0


async def until(predicate: Callable[[], bool], timeout: float, what: str) -> float:
    began = time.monotonic()
    while not predicate():
        if time.monotonic() - began > timeout:
            raise TimeoutError(what)
        await asyncio.sleep(0.1)
    return time.monotonic() - began


class Load:
    """30 sessions with a request each, and one parked on a clarification, on live sockets."""

    def __init__(self, system: ClusterSystem, tag: str) -> None:
        self.system, self.tag = system, tag
        self.clients: list[Client] = []
        self.request_ids: list[str] = []
        self.ends: Counter[str] = Counter()
        self.outcomes: Counter[str] = Counter()
        self.ended_at: dict[str, float] = {}
        self.parked: Client | None = None
        self.parked_id = ""

    async def open(self) -> None:
        self.parked = await Client(self.system.ws_url, events=True).__aenter__()
        await self.parked.send({"uuid": self.parked.uuid, "message": f"the weather {self.tag}"})
        while True:
            frame = await self.parked.recv(60)
            if frame.get("event") == "ack":
                self.parked_id = frame["request_id"]
            if frame.get("status") == "awaiting_clarification":
                break
        for i in range(REQUESTS):
            text = f"email report #{i} please" if i % EMAIL_EVERY == 0 else f"do task #{i}"
            client = await Client(self.system.ws_url, events=True).__aenter__()
            await client.send({"uuid": client.uuid, "message": f"{text} {self.tag}"})
            while (frame := await client.recv(60)).get("event") != "ack":
                pass
            self.clients.append(client)
            self.request_ids.append(frame["request_id"])

    async def finish(self, timeout: float = 180.0) -> None:
        """Every socket read to its request's end; the parked request answered and ended."""

        async def read(client: Client, rid: str) -> None:
            while True:
                frame = await client.recv(timeout)
                if "on_chat_model_end" in frame:
                    self.ends[rid] += 1
                    self.ended_at.setdefault(rid, time.monotonic())
                    self.outcomes[str(frame.get("status"))] += 1
                    return

        await asyncio.gather(
            *(read(c, r) for c, r in zip(self.clients, self.request_ids, strict=True))
        )
        assert self.parked is not None
        # Right after a fault the bus may not answer the gateway yet: it refuses with
        # `unavailable` ("please retry"), and the user sends the answer again, as told.
        end, refusals = await send_until_taken(self.parked, "Lisbon", timeout)
        assert all(r.get("code") == "unavailable" for r in refusals), refusals
        self.ends[self.parked_id] += 1
        assert end.get("status") == "completed", (end, refusals)

    async def close(self) -> None:
        for client in [*self.clients, *([self.parked] if self.parked else [])]:
            await client.__aexit__()


@dataclass
class Trial:
    """What a test of losing nodes works with: the system, its cluster, the fakes it scripts and
    counts, and the admin's connection (to every node)."""

    system: ClusterSystem
    cluster: NatsCluster
    fake: FakeOpenAI
    sendgrid: FakeSendGrid
    admin: NATS


@pytest.fixture
def trial(
    clustered: ClusterSystem,
    cluster: NatsCluster,
    fake_llm: FakeOpenAI,
    sendgrid: FakeSendGrid,
    admin: NATS,
) -> Trial:
    return Trial(clustered, cluster, fake_llm, sendgrid, admin)


async def under_load(
    name: str,
    trial: Trial,
    fault: Callable[[Callable[[], None]], Awaitable[dict[str, Any]]],
) -> dict[str, Any]:
    """Run `fault` with the load in flight (it lets the held model calls go once the fault has
    struck, so the requests move on during it), then check the promise; the figures."""
    system, fake, sendgrid, admin = trial.system, trial.fake, trial.sendgrid, trial.admin
    hold = threading.Event()
    tag = name.replace(" ", "-")
    load_script(fake, hold, tag, weather=True)
    offsets = {n: len(system.log(n)) for n in system.procs}
    load = Load(system, tag)
    await load.open()
    await until(
        lambda: len(fake.chat_calls("fake-worker")) >= REQUESTS, 60, "requests not in flight"
    )
    statuses: list[tuple[float, int]] = []
    polling = True

    async def poll() -> None:
        while polling:
            statuses.append((time.monotonic(), await asyncio.to_thread(readyz, system)))
            await asyncio.sleep(0.25)

    poller = asyncio.create_task(poll())
    began = time.monotonic()
    figures = await fault(hold.set)
    hold.set()
    await load.finish()
    last_answer = max(load.ended_at.values()) - began
    await until(lambda: readyz(system) == 200, 60, "/readyz did not come back")
    polling = False
    await poller
    await load.close()

    ours = await stored_ends(admin, system.namespace, [*load.request_ids, load.parked_id])
    sent = Counter(
        m["personalizations"][0]["to"][0]["email"]
        for m in sendgrid.mails
        if tag in m["personalizations"][0]["to"][0]["email"]
    )
    not_ready = [t - began for t, code in statuses if code != 200 and t >= began]
    report = {
        **figures,
        "in_flight": REQUESTS + 1,
        "last_answer_after_fault_began_s": round(last_answer, 1),
        "readyz_not_200_s": round(max(not_ready) - min(not_ready), 1) if not_ready else 0.0,
        "emails_sent": sum(sent.values()),
        "outcomes": dict(load.outcomes),
    }
    REPORT[name] = report
    assert all(n == 1 for n in load.ends.values()), load.ends
    if not all(n == 1 for n in ours.values()):  # say what the results stream holds
        info = await admin.jetstream().stream_info(Subjects(system.namespace).results_stream)
        raise AssertionError(f"terminal events per request: {ours}; stream: {info.state}")
    assert load.outcomes == {"completed": REQUESTS}, load.outcomes
    assert sum(sent.values()) == len(sent) == REQUESTS // EMAIL_EVERY, sent
    for service, offset in offsets.items():
        tail = system.log(service)[offset:]
        assert "Traceback" not in tail, f"{service} logged a traceback:\n{tail[-3000:]}"
    assert all(p.poll() is None for p in system.procs.values()), "a service exited"
    return report


def kill_for(cluster: NatsCluster, pick: Callable[[], Node], down: float = NODE_DOWN) -> Any:
    async def fault(release: Callable[[], None]) -> dict[str, Any]:
        node = pick()
        began = time.monotonic()
        node.kill()
        release()  # the model answers again: the requests move on while the node is down
        await asyncio.sleep(down)
        node.start()
        healthy = await asyncio.to_thread(cluster.wait_healthy, 60)
        return {
            "node": node.name,
            "down_s": down,
            "cluster_healthy_after_kill_s": round(time.monotonic() - began, 1),
            "healthy_after_restart_s": round(healthy, 1),
        }

    return fault


async def test_killing_the_node_every_service_is_connected_to_loses_nothing(trial: Trial) -> None:
    cluster = trial.cluster
    on = cluster.connected()
    assert set(on.values()) == {"n0"} and len(on) == 5, on  # only n0 was listed
    fault = kill_for(cluster, lambda: cluster.nodes[0])
    await under_load("connected node", trial, fault)
    moved = cluster.connected()
    assert len(moved) == 5, moved


async def test_killing_the_work_stream_leader_loses_nothing(trial: Trial) -> None:
    cluster, admin = trial.cluster, trial.admin
    stream = Subjects(trial.system.namespace).work_stream
    info = await admin.jetstream().stream_info(stream)
    assert info.config.num_replicas == 3
    leader = info.cluster.leader if info.cluster else None
    assert leader, info
    fault = kill_for(cluster, lambda: cluster.node(str(leader)))
    await under_load("stream leader", trial, fault)


async def test_killing_the_meta_leader_loses_nothing(trial: Trial) -> None:
    cluster = trial.cluster
    fault = kill_for(cluster, cluster.meta_leader)
    await under_load("meta leader", trial, fault)


async def test_a_rolling_restart_of_every_node_loses_nothing(trial: Trial) -> None:
    cluster = trial.cluster

    async def fault(release: Callable[[], None]) -> dict[str, Any]:
        began = time.monotonic()
        for node in cluster.nodes:
            await asyncio.to_thread(node.stop)
            release()
            node.start()
            await asyncio.to_thread(cluster.wait_healthy, 60)
        return {"node": "each in turn", "rolled_s": round(time.monotonic() - began, 1)}

    await under_load("rolling restart", trial, fault)


async def test_a_node_down_longer_than_the_lost_limit_makes_no_service_exit(
    trial: Trial,
) -> None:
    cluster = trial.cluster

    def busiest() -> Node:
        on = Counter(cluster.connected().values())
        return cluster.node(on.most_common(1)[0][0])

    fault = kill_for(cluster, busiest, down=LOST_EXIT_AFTER * 2)
    await under_load("node down long", trial, fault)
