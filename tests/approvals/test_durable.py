"""Approvals that hold through failures, on live services, their own nats-server (so it can be
restarted) and a fake SendGrid: the email worker SIGKILLed mid-send after the approval still
sends exactly one email; a parked approval survives a restart of every service and of
nats-server; an approval nobody answers expires and the email is declined with a note."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.runtime.bus.natsserver import NatsServer
from tests.support.approvals import answer, approval_env, ask_for_email, script_email, start
from tests.support.fakes.http import Recorded, Response
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.fakes.sendgrid import SEND, FakeSendGrid
from tests.support.gateway_client import AuthClient, api, wait_status
from tests.support.harness import System

pytestmark = pytest.mark.timeout(300)


class HeldSendGrid(FakeSendGrid):
    """SendGrid that, while `held`, takes each send and answers only once released."""

    def __init__(self) -> None:
        super().__init__()
        self.held = False
        self.arrived = threading.Event()
        self.release = threading.Event()
        self.route("POST", SEND, self._held_send)

    def _held_send(self, rec: Recorded) -> Response:
        if self.held:
            self.arrived.set()
            self.release.wait(60)
        return self._send(rec)


@pytest.fixture(scope="module")
def own_nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    server = NatsServer(store_dir=tmp_path_factory.mktemp("approvals-js")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def sendgrid() -> Iterator[HeldSendGrid]:
    with HeldSendGrid() as fake:
        yield fake
        fake.release.set()


@pytest.fixture(scope="module")
def durable(
    own_nats: NatsServer, fake_llm: FakeOpenAI, sendgrid: HeldSendGrid, logs_dir: Path
) -> Iterator[System]:
    # A send that never answered counts as unknown after SIDEKICK_SENDGRID_TIMEOUT + 15 s.
    env = approval_env(fake_llm, sendgrid, SIDEKICK_SENDGRID_TIMEOUT="3")
    with start(own_nats.url, env, logs_dir) as sys_:
        yield sys_


@pytest.fixture(autouse=True)
def _reset(sendgrid: HeldSendGrid) -> None:
    sendgrid.reset()
    sendgrid.held = False
    sendgrid.arrived.clear()
    sendgrid.release.clear()


async def test_the_email_worker_killed_mid_send_after_approval_sends_exactly_one_email(
    durable: System, fake_llm: FakeOpenAI, sendgrid: HeldSendGrid
) -> None:
    script_email(fake_llm)
    async with AuthClient(durable.ws_url, "heidi", events=True) as heidi:
        request_id, _ = await ask_for_email(heidi)
        sendgrid.held = True
        await heidi.send({"uuid": heidi.uuid, "message": "yes", "reply_to": request_id})
        assert await asyncio.to_thread(sendgrid.arrived.wait, 60), "the send never started"
        durable.kill("workers")  # between the approval and SendGrid's answer
        sendgrid.held = False
        sendgrid.release.set()
        await asyncio.to_thread(durable.restart, "workers")
        done = await heidi.until_end_of(request_id, timeout=120)
    # The redelivered task found its approved send already started: not sent again.
    assert len(sendgrid.mails) == 1
    assert done.end["status"] == "failed"
    assert "may or may not have been sent" in done.errors[0]["message"]


async def test_a_parked_approval_survives_a_restart_of_every_service_and_of_nats(
    durable: System, own_nats: NatsServer, fake_llm: FakeOpenAI, sendgrid: HeldSendGrid
) -> None:
    script_email(fake_llm)
    async with AuthClient(durable.ws_url, "ivan", events=True) as ivan:
        request_id, approval = await ask_for_email(ivan)
    durable.stop()
    port = own_nats.port
    own_nats.stop()
    own_nats.port = port
    await asyncio.to_thread(own_nats.start)
    await asyncio.to_thread(durable.start_all)
    async with api(durable.http_url, "ivan") as http:
        parked = (await http.get(f"/api/workflows/{request_id}")).json()
        assert parked["state"]["approval"]["digest"] == approval["digest"]
        ok = await http.post(
            f"/api/workflows/{request_id}/feedback",
            json={"approval": "approved", "approval_id": approval["approval_id"]},
        )
        assert ok.status_code == 200, ok.text
        done = await wait_status(http, request_id, "completed", "failed", timeout=90)
    assert done["status"] == "completed"
    (mail,) = sendgrid.mails
    assert mail["content"][0]["value"] == approval["arguments"]["body"]


@pytest.fixture(scope="module")
def impatient(
    own_nats: NatsServer, fake_llm: FakeOpenAI, sendgrid: HeldSendGrid, logs_dir: Path
) -> Iterator[System]:
    env = approval_env(fake_llm, sendgrid, SIDEKICK_APPROVAL_TIMEOUT="2")
    with start(own_nats.url, env, logs_dir) as sys_:
        yield sys_


async def test_an_approval_nobody_answers_expires_and_the_email_is_declined_with_a_note(
    impatient: System, fake_llm: FakeOpenAI, sendgrid: HeldSendGrid
) -> None:
    script_email(fake_llm)
    async with AuthClient(impatient.ws_url, "judy", events=True) as judy:
        request_id, _ = await ask_for_email(judy)
        done = await judy.until_end_of(request_id)
        late = await answer(judy, request_id, "yes")
    assert done.end["status"] == "completed"
    assert "no one approved it before the approval expired" in done.text
    assert late[-1]["error"]["code"] == "conflict"
    async with api(impatient.http_url, "judy") as http:
        state = (await http.get(f"/api/workflows/{request_id}")).json()["state"]
    (decision,) = state["approvals"][0]["decisions"]
    assert (decision["decision"], decision["by"]) == ("expired", "sidekick")
    assert sendgrid.mails == []
