"""A bus outage inside a worker's handler, on live services and their own nats-server (so it can
be stopped): the email worker has its draft from the model while nats-server is down, so its
ledger claim cannot be answered. The task is retried by the durable consumer once the server is
back, the request completes with exactly one email, and the workers' log says so in one WARNING
line naming the request: no traceback, no ERROR."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from services.runtime.bus.natsserver import NatsServer
from tests.support.fakes.openai_server import FakeOpenAI, Reply
from tests.support.fakes.sendgrid import FakeSendGrid
from tests.support.harness import Client, System, llm_env
from tests.support.workers_support import decide

pytestmark = pytest.mark.timeout(240)

SENDER = "sidekick@example.com"


@pytest.fixture(scope="module")
def own_nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    server = NatsServer(store_dir=tmp_path_factory.mktemp("outage-js")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def sendgrid() -> Iterator[FakeSendGrid]:
    with FakeSendGrid() as fake:
        yield fake


@pytest.fixture(scope="module")
def outage_system(
    own_nats: NatsServer, fake_llm: FakeOpenAI, sendgrid: FakeSendGrid, logs_dir: Path
) -> Iterator[System]:
    env = {
        **llm_env(fake_llm.base_url),
        "SIDEKICK_WORKERS": "GENERAL,EMAIL",
        "SENDGRID_API_KEY": sendgrid.key,
        "SENDGRID_FROM_EMAIL": SENDER,
        "SIDEKICK_SENDGRID_BASE_URL": sendgrid.url,
        # An outage, not approvals, is tested here.
        "SIDEKICK_APPROVALS": "email.send=allow;email.send:unwritten_recipient=allow",
        "SIDEKICK_LLM_TIMEOUT": "60",
        # A short send timeout keeps a claim left `started` from holding the test long.
        "SIDEKICK_SENDGRID_TIMEOUT": "3",
    }
    with System(own_nats.url, env, logs_dir).start_all() as sys_:
        yield sys_


def script(fake: FakeOpenAI, hold: threading.Event) -> None:
    """The orchestrator sends an email to ada@example.com; the worker's first draft is held
    until `hold` is set (later ones answer at once)."""
    fake.script(
        "fake-orchestrator",
        decide("EMAIL", "Email Ada", to="ada@example.com", subject="Friday"),
    )
    drafts = 0

    def worker(body: dict[str, Any]) -> Reply:
        nonlocal drafts
        drafts += 1
        draft = {"subject": "Friday", "body": "Hi Ada, the meeting moved to 10am. Best"}
        return Reply(json.dumps(draft), wait=hold if drafts == 1 else None)

    fake.script("fake-worker", worker)


async def until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        await asyncio.sleep(0.1)


async def test_an_outage_inside_the_email_worker_is_retried_with_one_warning_and_one_email(
    outage_system: System, own_nats: NatsServer, fake_llm: FakeOpenAI, sendgrid: FakeSendGrid
) -> None:
    hold = threading.Event()
    script(fake_llm, hold)
    offsets = {name: len(outage_system.log(name)) for name in outage_system.procs}
    offset = offsets["workers"]
    try:
        async with Client(outage_system.ws_url, events=True) as client:
            await client.send({"uuid": client.uuid, "message": "email ada@example.com re friday"})
            while (frame := await client.recv(30)).get("event") != "ack":
                pass
            request_id = str(frame["request_id"])
            await until(lambda: len(fake_llm.chat_calls("fake-worker")) >= 1, 30, "no draft")

            port = own_nats.port
            own_nats.stop()  # the worker is mid-task, waiting for its draft
            hold.set()  # the draft comes back; the ledger's claim finds no server

            def warned() -> bool:
                tail = outage_system.log("workers")[offset:]
                return any("WARNING" in line and request_id in line for line in tail.splitlines())

            await until(warned, 30, "the workers logged no warning for the outage")
            own_nats.port = port
            await asyncio.to_thread(own_nats.start)

            done = await client.until_end(120)
    finally:
        hold.set()
    assert done.end["status"] == "completed", done.frames
    assert [m["personalizations"][0]["to"][0]["email"] for m in sendgrid.mails] == [
        "ada@example.com"
    ]
    tail = outage_system.log("workers")[offset:]
    ours = [line for line in tail.splitlines() if request_id in line]
    retried = [line for line in ours if "WARNING" in line and "the bus did not answer" in line]
    assert len(retried) == 1 and "retrying" in retried[0], "\n".join(ours)
    # The outage is said once: what only echoes it (sharing what the model client learned) is
    # not a second warning.
    echoes = [line for line in tail.splitlines() if "WARNING" in line and "endpoints:" in line]
    assert echoes == [], "\n".join(echoes)
    assert "Traceback" not in tail and not re.search(r"\bERROR\b", tail), tail[-3000:]
    for name, start in offsets.items():
        rest = outage_system.log(name)[start:]
        assert "Traceback" not in rest, f"{name} logged a traceback:\n{rest[-3000:]}"
