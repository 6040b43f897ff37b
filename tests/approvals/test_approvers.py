"""Who decides an approval, on live services and the fake SendGrid: an operator named in
SIDEKICK_APPROVERS sees another principal's pending approval in its queue and decides it there;
a stranger sees nothing and is told there is no such approval; a rule that leaves an action to
operators refuses the request's own principal. And a decision the gateway recorded but never
passed on (it stopped in between) does not strand the request: the orchestrator's sweep resumes
it, and the email is sent once."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from nats.aio.client import Client as NATS

from contracts.subjects import Subjects
from services.runtime.approvals.records import Approvals
from tests.support.approvals import answer, asked_to_email, emails_asked, operator_approves
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.fakes.sendgrid import FakeSendGrid
from tests.support.gateway_client import api
from tests.support.harness import System
from tests.support.systems import Systems

pytestmark = pytest.mark.timeout(240)
OPERATOR = "trent"


@pytest.fixture(scope="module")
def operated(systems: Systems, sendgrid: FakeSendGrid) -> Iterator[System]:
    # Email asks; merging is for operators only (no request here merges: it proves the rule
    # is read with an operator configured); a short sweep so a stranded decision is found soon.
    yield from emails_asked(
        systems,
        sendgrid,
        SIDEKICK_APPROVERS=OPERATOR,
        SIDEKICK_SWEEP_INTERVAL="1",
        SIDEKICK_APPROVALS="github__merge_*=ask;github__merge_*:approver=operator",
    )


async def test_an_operator_decides_another_principals_approval_from_its_queue(
    operated: System, fake_llm: FakeOpenAI, sendgrid: FakeSendGrid
) -> None:
    async with asked_to_email(operated, fake_llm, "alice") as (alice, request_id, approval):
        assert approval["approvers"] == ["alice", OPERATOR]
        path = f"/api/approvals/{approval['approval_id']}"
        async with api(operated.http_url, "mallory") as mallory:
            assert (await mallory.get("/api/approvals")).json() == {"approvals": []}
            stolen = await mallory.post(path, json={"decision": "approve"})
            assert stolen.status_code == 404, stolen.text
        async with api(operated.http_url, OPERATOR) as ops:
            queue = (await ops.get("/api/approvals")).json()["approvals"]
            assert [a["approval_id"] for a in queue] == [approval["approval_id"]]
            assert queue[0]["arguments"]["to"] == "ada@example.com"
            unclear = await ops.post(path, json={"decision": "perhaps"})
            assert unclear.status_code == 422 and sendgrid.mails == []
            decided = await ops.post(path, json={"decision": "approve"})
            assert decided.status_code == 200, decided.text
            body = decided.json()
            assert body["request_id"] == request_id and body["approval"]["state"] == "approved"
            assert body["approval"]["decisions"][0]["by"] == OPERATOR
            again = await ops.post(path, json={"decision": "deny"})
            assert again.status_code == 409, again.text
        done = await alice.until_end_of(request_id)
        assert done.end["status"] == "completed", done.end
        late = await answer(alice, request_id, "no")
        assert late[-1]["error"]["code"] == "conflict"
    assert len(sendgrid.mails) == 1
    async with api(operated.http_url, OPERATOR) as ops:
        assert (await ops.get("/api/approvals")).json() == {"approvals": []}


@pytest.fixture(scope="module")
def operators_only(systems: Systems, sendgrid: FakeSendGrid) -> Iterator[System]:
    rule = "email.send=ask;email.send:approver=operator"
    yield from emails_asked(systems, sendgrid, SIDEKICK_APPROVERS=OPERATOR, SIDEKICK_APPROVALS=rule)


async def test_an_action_left_to_operators_refuses_the_requests_own_principal(
    operators_only: System, fake_llm: FakeOpenAI, sendgrid: FakeSendGrid
) -> None:
    async with asked_to_email(operators_only, fake_llm, "bob") as (bob, request_id, approval):
        assert approval["approvers"] == [OPERATOR] and approval["approver"] == "operator"
        refused = await answer(bob, request_id, "yes")
        assert refused[-1]["error"]["code"] == "conflict"
        assert "decided by an operator" in refused[-1]["error"]["message"]
        assert sendgrid.mails == []
        ops = operators_only.http_url
        done = await operator_approves(bob, ops, OPERATOR, request_id, approval)
    assert done[-1]["status"] == "completed", done[-1]
    assert len(sendgrid.mails) == 1


async def test_a_decision_recorded_but_never_passed_on_is_resumed_by_the_sweep(
    operated: System, fake_llm: FakeOpenAI, sendgrid: FakeSendGrid, nc: NATS
) -> None:
    async with asked_to_email(operated, fake_llm, "carol") as (carol, request_id, approval):
        # What a gateway does first on a "yes", and all it did before it stopped: the decision
        # is in the approvals bucket; the request was neither moved nor told.
        kv = await nc.jetstream().key_value(Subjects(operated.namespace).bucket("approvals"))
        await Approvals(kv).decide(approval["approval_id"], "carol", "approved")
        done = await carol.until_end_of(request_id, timeout=60)
    assert done.end["status"] == "completed", done.end
    assert len(sendgrid.mails) == 1
    assert sendgrid.mails[0]["personalizations"][0]["to"] == [{"email": "ada@example.com"}]
