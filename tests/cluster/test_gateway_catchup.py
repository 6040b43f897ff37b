"""A gateway catches up once its NATS connection is back (services/gateway/core/catchup.py), on a
3-node cluster whose nodes do not announce each other to clients: the gateway is given the first
node only, every other service the other two. A request's worker is held; the gateway's node is
killed; the held answer goes on, so the request's end is published and stored while the gateway
cannot hear it; the node comes back. The client, still on the gateway's WebSocket, gets that end
exactly once; so do HTTP callers waiting at that gateway: a `/v1` call, a streaming `/v1` call,
a workflows chat (these wait on the gateway's core subscription) and an AG-UI run (it follows
the results stream)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from nats.aio.client import Client as NATS

from services.runtime.bus.core import OUTAGE_ERRORS
from tests.support.agui import run_input
from tests.support.fakes.openai_server import FakeOpenAI, Reply
from tests.support.harness import Client, System
from tests.support.natscluster import ClusterSystem, NatsCluster, finals_by_request
from tests.support.protocols import ag_ui_stream
from tests.support.scripts import last_user, verdict
from tests.support.sse import events
from tests.support.systems import Systems
from tests.support.waits import wait_for

pytestmark = pytest.mark.timeout(400)

NAMESPACE = "catchup"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsCluster]:
    nodes = NatsCluster(tmp_path_factory.mktemp("catchup"), NAMESPACE, advertise=False)
    yield nodes.start()
    nodes.stop()


@pytest.fixture(scope="module")
def split(systems: Systems, cluster: NatsCluster) -> Iterator[System]:
    """The gateway on node n0 only; every other service on n1 and n2."""
    yield from systems.run(
        nats_url=",".join(n.url for n in cluster.nodes[1:]),
        cluster=cluster,
        namespace=NAMESPACE,
        service_urls={"gateway": cluster.nodes[0].url},
        workers="GENERAL",
        SIDEKICK_LLM_TIMEOUT="60",
        SIDEKICK_MAX_DELIVER="20",
    )


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
            await wait_for(lambda: len(fake_llm.chat_calls("fake-worker")) >= 1, 60, "no worker")

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


async def v1_call(base: str, text: str) -> dict[str, Any]:
    """A blocking /v1 call: the completion."""
    body = {"model": "sidekick", "messages": [{"role": "user", "content": text}]}
    async with httpx.AsyncClient(base_url=base, timeout=200) as http:
        resp = await http.post("/v1/chat/completions", json=body)
    assert resp.status_code == 200, resp.text
    completion: dict[str, Any] = resp.json()
    return completion


async def workflow_chat(base: str, workflow: str, text: str) -> str:
    """A question about a workflow (any request of the caller's): the response."""
    async with httpx.AsyncClient(base_url=base, timeout=200) as http:
        resp = await http.post(f"/api/workflows/{workflow}/chat", json={"message": text})
    assert resp.status_code == 200, resp.text
    return str(resp.json()["response"])


async def v1_stream(base: str, text: str) -> list[str]:
    """A streaming /v1 call: each chunk's finish reason, up to [DONE]."""
    body = {"model": "sidekick", "messages": [{"role": "user", "content": text}], "stream": True}
    finishes: list[str] = []
    async with (
        httpx.AsyncClient(base_url=base, timeout=200) as http,
        http.stream("POST", "/v1/chat/completions", json=body) as resp,
    ):
        async for sse in events(resp):
            if sse.data == "[DONE]":
                return finishes
            data = sse.json
            assert "error" not in data, data
            finishes += [c["finish_reason"] for c in data["choices"] if c["finish_reason"]]
    return finishes


async def agui_run(base: str, text: str) -> list[str]:
    """An AG-UI run: its event types, up to its end."""
    types: list[str] = []
    async with ag_ui_stream(base, run_input(text), timeout=200) as (_, resp):
        async for sse in events(resp):
            types.append(sse.json["type"])
            if types[-1] in ("RUN_FINISHED", "RUN_ERROR"):
                break
    return types


async def test_http_callers_waiting_on_a_request_get_an_end_published_while_it_reconnects(
    split: ClusterSystem, cluster: NatsCluster, fake_llm: FakeOpenAI, admin: NATS
) -> None:
    hold = threading.Event()
    script(fake_llm, hold)
    n0 = cluster.nodes[0]
    base = split.http_url
    earlier = (await v1_call(base, "a quick question"))["id"].removeprefix("chatcmpl-")
    assert await stored(admin, earlier, 30) == 1
    before = sum((await finals_by_request(admin, NAMESPACE)).values())
    try:
        calls: dict[str, asyncio.Task[Any]] = {
            "v1": asyncio.create_task(v1_call(base, "held for v1")),
            "workflows chat": asyncio.create_task(workflow_chat(base, earlier, "held for chat")),
            "v1 stream": asyncio.create_task(v1_stream(base, "held for v1 stream")),
            "ag-ui": asyncio.create_task(agui_run(base, "held for ag-ui")),
        }
        await wait_for(lambda: len(fake_llm.chat_calls("fake-worker")) >= 5, 60, "not in flight")
        n0.kill()
        hold.set()
        for _ in range(120):
            with contextlib.suppress(*OUTAGE_ERRORS):
                if sum((await finals_by_request(admin, NAMESPACE)).values()) >= before + 4:
                    break
            await asyncio.sleep(0.5)
        assert not any(c.done() for c in calls.values()), "an end came while n0 was down"
        n0.start()
        await asyncio.to_thread(cluster.wait_healthy, 60)
        done, _ = await asyncio.wait(calls.values(), timeout=60)
    finally:
        hold.set()
    missed = [name for name, call in calls.items() if call not in done]
    for call in calls.values():
        call.cancel()
    assert not missed, f"no end reached {missed} within 60 s of n0 coming back"
    assert calls["v1"].result()["choices"][0]["message"]["content"].startswith("Answer to:")
    assert calls["workflows chat"].result().startswith("Answer to:")
    assert calls["v1 stream"].result() == ["stop"]
    assert calls["ag-ui"].result()[-1] == "RUN_FINISHED", calls["ag-ui"].result()
