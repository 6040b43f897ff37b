"""EMAIL in process, against a real nats-server (the ledger lives in KV) and the fake SendGrid:
at most once per (request, attempt), recipients checked, SendGrid's refusals made clear."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from contracts import WorkerTask
from services.runtime.bus.natsserver import NatsServer
from services.workers.base import WorkerDeps
from services.workers.email import EmailWorker
from services.workers.settings import WorkerSettings
from tests.support.fakes.http import Response
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.fakes.sendgrid import SENDER, FakeSendGrid
from tests.support.scripts import by_schema
from tests.support.workers_support import connected_deps, task


@pytest.fixture(autouse=True)
def _drafts(fake_llm: FakeOpenAI) -> None:
    fake_llm.script(
        "fake-worker",
        by_schema({"EmailDraft": lambda body: {"subject": "Hello", "body": "Hi,\n\nHello.\n"}}),
    )


@pytest.fixture
async def deps(nats_server: NatsServer, fake_llm: FakeOpenAI) -> AsyncIterator[WorkerDeps]:
    made = await connected_deps(fake_llm, nats_server.url, "m" + uuid.uuid4().hex[:10])
    yield made
    await made.bus.broker.stop()


def worker(deps: WorkerDeps, sendgrid: FakeSendGrid, **overrides: Any) -> EmailWorker:
    values: dict[str, Any] = {
        "sendgrid_api_key": sendgrid.key,
        "sendgrid_from_email": SENDER,
        "sendgrid_base_url": sendgrid.url,
        "sendgrid_timeout": 5,
        # Sending itself is tested here; approvals in tests/approvals/.
        "approvals": "email.send=allow;email.send:unwritten_recipient=allow",
        **overrides,
    }
    return EmailWorker(deps, WorkerSettings(**values))


def email_task(**parameters: str) -> WorkerTask:
    return task("EMAIL", "Send the email", request_id=uuid.uuid4().hex, **parameters)


async def test_the_same_email_task_run_twice_at_once_is_sent_once(
    deps: WorkerDeps, sendgrid: FakeSendGrid
) -> None:
    one = email_task(to="dee@example.com", subject="Twice")
    first, second = await asyncio.gather(
        worker(deps, sendgrid).run(one), worker(deps, sendgrid).run(one)
    )
    assert len(sendgrid.mails) == 1
    assert first.success and second.success
    assert first.output == second.output and "Email sent to dee@example.com" in first.output


async def test_a_later_attempt_of_the_same_request_is_its_own_send(
    deps: WorkerDeps, sendgrid: FakeSendGrid
) -> None:
    one = email_task(to="dee@example.com")
    assert (await worker(deps, sendgrid).run(one)).success
    assert (await worker(deps, sendgrid).run(one.model_copy(update={"attempt": 2}))).success
    assert len(sendgrid.mails) == 2


async def test_a_refused_send_is_a_clear_error_and_is_not_tried_again_for_that_attempt(
    deps: WorkerDeps, sendgrid: FakeSendGrid
) -> None:
    one = email_task(to="dee@example.com")
    refused = await worker(deps, sendgrid, sendgrid_api_key="SG.wrong").run(one)
    assert not refused.success and not refused.retryable
    assert "SendGrid refused the email (HTTP 401)" in (refused.error or "")
    assert "authorization grant is invalid" in (refused.error or "")
    again = await worker(deps, sendgrid).run(one)
    assert again.error == refused.error and len(sendgrid.mails) == 1


async def test_a_sendgrid_outage_is_retryable(deps: WorkerDeps, sendgrid: FakeSendGrid) -> None:
    sendgrid.failure = Response(503, {"errors": [{"message": "try later"}]})
    done = await worker(deps, sendgrid).run(email_task(to="dee@example.com"))
    assert not done.success and done.retryable
    assert "HTTP 503" in (done.error or "")


async def test_a_recipient_outside_the_allowed_domains_is_refused_before_any_model_call(
    deps: WorkerDeps, sendgrid: FakeSendGrid, fake_llm: FakeOpenAI
) -> None:
    w = worker(deps, sendgrid, email_allowed_domains="example.com, corp.example")
    done = await w.run(email_task(to="eve@elsewhere.org"))
    assert not done.success
    assert done.error == (
        "Invalid recipient 'eve@elsewhere.org': the domain elsewhere.org is not allowed "
        "(SIDEKICK_EMAIL_ALLOWED_DOMAINS: corp.example, example.com)"
    )
    assert sendgrid.mails == [] and fake_llm.chat_calls("fake-worker") == []
    assert (await w.run(email_task(to="Ann <ann@corp.example>"))).success


async def test_loosely_spelled_parameter_names_are_understood(
    deps: WorkerDeps, sendgrid: FakeSendGrid, fake_llm: FakeOpenAI
) -> None:
    loose = email_task(**{"To-Email": "hal@example.com", "Body notes": "lunch moved to 1pm"})
    assert (await worker(deps, sendgrid).run(loose)).success
    assert sendgrid.mails[0]["personalizations"][0]["to"] == [{"email": "hal@example.com"}]
    (draft,) = fake_llm.chat_calls("fake-worker")
    assert "Notes for the body: lunch moved to 1pm" in draft["messages"][-1]["content"]


async def test_a_task_without_a_to_parameter_takes_the_one_address_it_names(
    deps: WorkerDeps, sendgrid: FakeSendGrid
) -> None:
    named = task("EMAIL", "Write to fay@example.com about lunch", request_id=uuid.uuid4().hex)
    assert (await worker(deps, sendgrid).run(named)).success
    assert sendgrid.mails[0]["personalizations"][0]["to"] == [{"email": "fay@example.com"}]
    vague = task("EMAIL", "Write to my boss about lunch", request_id=uuid.uuid4().hex)
    done = await worker(deps, sendgrid).run(vague)
    assert not done.success and "names no recipient" in (done.error or "")


async def test_a_key_without_a_sender_address_is_a_clear_configuration_error(
    deps: WorkerDeps, sendgrid: FakeSendGrid
) -> None:
    done = await worker(deps, sendgrid, sendgrid_from_email="").run(email_task(to="g@example.com"))
    assert not done.success and "SENDGRID_FROM_EMAIL" in (done.error or "")
    assert sendgrid.mails == []
