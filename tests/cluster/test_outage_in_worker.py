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
from collections.abc import Iterator
from typing import Any

import pytest

from services.runtime.bus.natsserver import NatsServer
from tests.support.fakes.openai_server import FakeOpenAI, Reply
from tests.support.fakes.sendgrid import FakeSendGrid
from tests.support.harness import Client, System
from tests.support.scripts import decide
from tests.support.systems import Systems, sending_freely
from tests.support.waits import wait_for

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def outage_system(
    systems: Systems, own_nats: NatsServer, sendgrid: FakeSendGrid
) -> Iterator[System]:
    yield from sending_freely(
        systems,
        sendgrid,
        nats_url=own_nats.url,
        SIDEKICK_LLM_TIMEOUT="60",
        # A short send timeout keeps a claim left `started` from holding the test long.
        SIDEKICK_SENDGRID_TIMEOUT="3",
    )


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
            await wait_for(lambda: len(fake_llm.chat_calls("fake-worker")) >= 1, 30, "no draft")

            port = own_nats.port
            own_nats.stop()  # the worker is mid-task, waiting for its draft
            hold.set()  # the draft comes back; the ledger's claim finds no server

            def warned() -> bool:
                tail = outage_system.log("workers")[offset:]
                return any("WARNING" in line and request_id in line for line in tail.splitlines())

            await wait_for(warned, 30, "the workers logged no warning for the outage")
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
