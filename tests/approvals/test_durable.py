"""Approvals that hold through failures, on live services, their own nats-server (so it can be
restarted) and a fake SendGrid: the email worker SIGKILLed mid-send after the approval still
sends exactly one email; a parked approval survives a restart of every service and of
nats-server; an approval nobody answers expires and the email is declined with a note."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from services.runtime.bus.natsserver import NatsServer
from tests.support.approvals import (
    answer,
    approved_then_killed,
    ask_for_email,
    asked_to_email,
    emails_asked,
    feedback,
)
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.fakes.sendgrid import FakeSendGrid
from tests.support.gateway_client import AuthClient, api, wait_status
from tests.support.harness import System
from tests.support.scripts import script_email
from tests.support.systems import Systems, restarted

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def durable(systems: Systems, own_nats: NatsServer, sendgrid: FakeSendGrid) -> Iterator[System]:
    # A send that never answered counts as unknown after SIDEKICK_SENDGRID_TIMEOUT + 15 s.
    yield from emails_asked(systems, sendgrid, nats_url=own_nats.url, SIDEKICK_SENDGRID_TIMEOUT="3")


@pytest.fixture(scope="module")
def impatient(systems: Systems, own_nats: NatsServer, sendgrid: FakeSendGrid) -> Iterator[System]:
    yield from emails_asked(systems, sendgrid, nats_url=own_nats.url, SIDEKICK_APPROVAL_TIMEOUT="2")


async def test_the_email_worker_killed_mid_send_after_approval_sends_exactly_one_email(
    durable: System, fake_llm: FakeOpenAI, sendgrid: FakeSendGrid
) -> None:
    async with asked_to_email(durable, fake_llm, "heidi") as (heidi, request_id, _):
        await approved_then_killed(heidi, request_id, durable, sendgrid, "the send")
        done = await heidi.until_end_of(request_id, timeout=120)
    # The redelivered task found its approved send already started: not sent again.
    assert len(sendgrid.mails) == 1
    assert done.end["status"] == "failed"
    assert "may or may not have been sent" in done.errors[0]["message"]


async def test_a_parked_approval_survives_a_restart_of_every_service_and_of_nats(
    durable: System, own_nats: NatsServer, fake_llm: FakeOpenAI, sendgrid: FakeSendGrid
) -> None:
    script_email(fake_llm)
    async with AuthClient(durable.ws_url, "ivan", events=True) as ivan:
        request_id, approval = await ask_for_email(ivan)
    await restarted(durable, own_nats)
    async with api(durable.http_url, "ivan") as http:
        parked = (await http.get(f"/api/workflows/{request_id}")).json()
        assert parked["state"]["approval"]["digest"] == approval["digest"]
        ok = await feedback(
            http, request_id, approval="approved", approval_id=approval["approval_id"]
        )
        assert ok.status_code == 200, ok.text
        done = await wait_status(http, request_id, "completed", "failed", timeout=90)
    assert done["status"] == "completed"
    (mail,) = sendgrid.mails
    assert mail["content"][0]["value"] == approval["arguments"]["body"]


async def test_an_approval_nobody_answers_expires_and_the_email_is_declined_with_a_note(
    impatient: System, fake_llm: FakeOpenAI, sendgrid: FakeSendGrid
) -> None:
    async with asked_to_email(impatient, fake_llm, "judy") as (judy, request_id, _):
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
