"""Two walls of approvals attacked through the public doors, on live services, a real
nats-server and the fake SendGrid counting sends.

An approval's expiry holds at the moment of deciding: a yes 0.5 s after `expires_at` is refused
as expired, from an operator's queue, the WebSocket or the workflows API alike, and no email
goes out. The orchestrator's sweep never runs here (SIDEKICK_SWEEP_INTERVAL is an hour), so
nothing but the decision's own check stands between the late yes and the send; the request
then goes on, declined, at once.

A recipient counts as written only when the user wrote that whole address: `boss@company.co`
for `boss@company.com`, or `smith@example.com` for `j.smith@example.com`, asks even where the
policy allows email to written recipients."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import pytest

from contracts import utcnow
from tests.support.approvals import ask_for_email, emails_asked, feedback
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.fakes.sendgrid import FakeSendGrid
from tests.support.gateway_client import AuthClient, api
from tests.support.harness import Conversation, System
from tests.support.scripts import by_schema, decide
from tests.support.systems import Systems

pytestmark = pytest.mark.timeout(240)
OPERATOR = "trent"
EXPIRED = "no one approved it before the approval expired"
TTL = 3.0  # SIDEKICK_APPROVAL_TIMEOUT: short, so the tests wait seconds for an expiry


@pytest.fixture(scope="module")
def trusting(systems: Systems, sendgrid: FakeSendGrid) -> Iterator[System]:
    """Email to an address the user wrote is sent without asking; any other address asks."""
    yield from emails_asked(
        systems,
        sendgrid,
        SIDEKICK_APPROVAL_TIMEOUT=f"{TTL:g}",
        approvals="email.send=allow",
        SIDEKICK_APPROVERS=OPERATOR,
        SIDEKICK_SWEEP_INTERVAL="3600",
    )


def script_email_to(fake_llm: FakeOpenAI, to: str) -> None:
    """The orchestrator has the EMAIL worker write to `to`; its draft is always the same."""
    fake_llm.script("fake-orchestrator", decide("EMAIL", "Email about Friday", to=to))
    bodies = itertools.repeat("Hi,\n\nThe meeting moved to 10am Friday.\n\nBest")
    fake_llm.script(
        "fake-worker",
        by_schema({"EmailDraft": lambda body: {"subject": "Friday", "body": next(bodies)}}),
    )


async def until_parked(client: AuthClient, text: str) -> tuple[str, list[dict[str, Any]]]:
    """Send `text` and read to the request's first end: (request id, its frames)."""
    request_id = await client.ack(text)
    frames = await client.frames_until(
        lambda f: "on_chat_model_end" in f and f.get("request_id") == request_id, 90
    )
    return request_id, frames


async def past_expiry(approval: dict[str, Any], by: float = 0.5) -> None:
    """Wait until `by` seconds after the approval's expiry."""
    expires = datetime.fromisoformat(approval["expires_at"])
    await asyncio.sleep(max(0.0, (expires - utcnow()).total_seconds() + by))


@asynccontextmanager
async def expired_to_ada(
    system: System, fake_llm: FakeOpenAI, principal: str
) -> AsyncIterator[tuple[AuthClient, str, dict[str, Any]]]:
    """`principal` asked for an email to Ada, whose approval has since expired: (its client, the
    request id, the approval)."""
    script_email_to(fake_llm, "ada@example.com")
    async with AuthClient(system.ws_url, principal, events=True) as client:
        request_id, approval = await ask_for_email(client, "email Ada about friday")
        await past_expiry(approval)
        yield client, request_id, approval


async def request_end(client: AuthClient, request_id: str) -> Conversation:
    """Frames up to the request's own end (not a refused answer's "rejected" end frame)."""
    frames = await client.frames_until(
        lambda f: (
            "on_chat_model_end" in f
            and f.get("request_id") == request_id
            and f.get("status") != "rejected"
        ),
        90,
    )
    return Conversation(
        [
            f
            for f in frames
            if f.get("request_id", request_id) == request_id and f.get("status") != "rejected"
        ]
    )


async def test_an_operators_yes_after_expiry_is_refused_and_nothing_is_sent(
    trusting: System, fake_llm: FakeOpenAI, sendgrid: FakeSendGrid
) -> None:
    script_email_to(fake_llm, "ada@example.com")
    async with AuthClient(trusting.ws_url, "alice", events=True) as alice:
        request_id, approval = await ask_for_email(alice, "email Ada about friday")
        assert approval["approvers"] == ["alice", OPERATOR]
        path = f"/api/approvals/{approval['approval_id']}"
        async with api(trusting.http_url, OPERATOR) as ops:
            queue = (await ops.get("/api/approvals")).json()["approvals"]
            assert [a["approval_id"] for a in queue] == [approval["approval_id"]]
            await past_expiry(approval)
            late = await ops.post(path, json={"decision": "approve"})
            assert late.status_code == 409, late.text
            message = late.json()["error"]["message"]
            assert f"approval {approval['approval_id']} expired at" in message, message
            assert "counts as declined" in message and "goes on without it" in message
            # The request went on, declined, without the sweep: nothing waits any more.
            done = await request_end(alice, request_id)
            assert (await ops.get("/api/approvals")).json() == {"approvals": []}
            again = await ops.post(path, json={"decision": "approve"})
            assert again.status_code == 409, again.text
    assert done.end["status"] == "completed", done.end
    assert EXPIRED in done.text, done.text
    assert sendgrid.mails == []
    async with api(trusting.http_url, "alice") as http:
        state = (await http.get(f"/api/workflows/{request_id}")).json()["state"]
    (kept,) = state["approvals"]
    assert kept["state"] == "expired"
    assert [(d["decision"], d["by"]) for d in kept["decisions"]] == [("expired", "sidekick")]


async def test_a_yes_on_the_websocket_after_expiry_is_refused_and_nothing_is_sent(
    trusting: System, fake_llm: FakeOpenAI, sendgrid: FakeSendGrid
) -> None:
    async with expired_to_ada(trusting, fake_llm, "bob") as (bob, request_id, approval):
        await bob.send(
            {
                "uuid": bob.uuid,
                "message": "yes",
                "reply_to": request_id,
                "approval_id": approval["approval_id"],
            }
        )
        refused = await bob.frames_until(lambda f: "error" in f, 30)
        assert refused[-1]["error"]["code"] == "conflict", refused[-1]
        assert "expired at" in refused[-1]["error"]["message"], refused[-1]
        done = await request_end(bob, request_id)
    assert done.end["status"] == "completed", done.end
    assert EXPIRED in done.text, done.text
    assert sendgrid.mails == []


async def test_a_yes_through_the_workflows_api_after_expiry_is_refused(
    trusting: System, fake_llm: FakeOpenAI, sendgrid: FakeSendGrid
) -> None:
    async with (
        api(trusting.http_url, "carol") as http,
        expired_to_ada(trusting, fake_llm, "carol") as (carol, request_id, approval),
    ):
        decided = {"approval": "approved", "approval_id": approval["approval_id"]}
        late = await feedback(http, request_id, **decided)
        assert late.status_code == 409, late.text
        assert "expired at" in late.json()["error"]["message"], late.text
        done = await request_end(carol, request_id)
    assert EXPIRED in done.text, done.text
    assert sendgrid.mails == []


@pytest.mark.parametrize(
    ("written", "mailed"),
    [
        ("boss@company.com", "boss@company.co"),  # a shorter domain
        ("j.smith@example.com", "smith@example.com"),  # the tail of the local part
        ("boss@company.com", "oss@company.com"),  # the tail of an address
        ("ann@example.com.au", "ann@example.com"),  # a domain's head
    ],
)
async def test_a_look_alike_of_the_address_the_user_wrote_asks_before_it_is_sent(
    trusting: System, fake_llm: FakeOpenAI, sendgrid: FakeSendGrid, written: str, mailed: str
) -> None:
    script_email_to(fake_llm, mailed)
    async with AuthClient(trusting.ws_url, "dave", events=True) as dave:
        _, approval = await ask_for_email(dave, f"email {written} about friday")
    assert approval["arguments"]["to"] == mailed
    assert approval["reason"] == f"you did not write {mailed} in this conversation"
    assert sendgrid.mails == []


async def test_the_address_the_user_wrote_is_sent_without_asking(
    trusting: System, fake_llm: FakeOpenAI, sendgrid: FakeSendGrid
) -> None:
    """The control for the look-alikes: this policy does send to a written address (in any
    case, at the end of a sentence) without asking."""
    script_email_to(fake_llm, "j.smith@example.com")
    async with AuthClient(trusting.ws_url, "erin", events=True) as erin:
        _, frames = await until_parked(erin, "Please email J.Smith@Example.com.")
    assert frames[-1]["status"] == "completed", frames[-1]
    assert [f for f in frames if f.get("event") == "clarification"] == []
    (mail,) = sendgrid.mails
    assert mail["personalizations"][0]["to"] == [{"email": "j.smith@example.com"}]
