"""The two walls from the inside, on a real nats-server (and, where marked, the in-memory KV too),
with the workers run in process against the fake SendGrid.

Expiry by the server's stamp: a decider that checked its clock before the expiry but stalled
past it before its write is refused, and the expiry is written in its place; and a worker never
acts on a decision the server stored after the approval's expiry, however it got there (an
older gateway, a hand-made write), neither the email worker nor the tools' gate.

Whose words are "written": the user's message, turns and answers, never a question the model
asked, though the task carries it beside the answer."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from contracts import (
    ClarificationAnswered,
    OrchestratorDecision,
    Parameter,
    RequestRouted,
    Usage,
    WorkerResult,
    WorkerTask,
    utcnow,
)
from contracts.approvals import Approval, ApprovalDecision, digest_of
from services.orchestrator import loop
from services.orchestrator.loop import Dispatch
from services.runtime.approvals import records
from services.runtime.approvals.errors import ApprovalExpired
from services.runtime.approvals.policy import Policy
from services.runtime.approvals.records import Approvals, approval_id
from services.runtime.bus.kvstore import key_for, write_if
from services.runtime.bus.natsserver import NatsServer
from services.workers.base import WorkerDeps
from services.workers.email import EmailWorker
from services.workers.settings import WorkerSettings
from services.workers.tools.gate import ToolGate
from services.workers.tools.notify import NotifyArgs
from services.workers.tools.toolbox import Call, Outcome, RunContext, Tool, ToolBox
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.fakes.sendgrid import SENDER, FakeSendGrid
from tests.support.scripts import by_schema
from tests.support.workers_support import connected_deps, task

SUBJECT, BODY = "Friday", "Hi,\n\nThe meeting moved to 10am Friday.\n\nBest"


def pending(request_id: str, action: str, arguments: dict[str, str], ttl: float) -> Approval:
    """The approval the orchestrator opens for attempt 1's ask, expiring in `ttl` seconds."""
    digest = digest_of(action, arguments)
    return Approval(
        approval_id=approval_id(request_id, 1, digest),
        request_id=request_id,
        attempt=1,
        approvers=["ada"],
        action=action,
        arguments=arguments,
        digest=digest,
        reason=f"the default approval policy says ask for {action}",
        expires_at=utcnow() + timedelta(seconds=ttl),
    )


async def approved_late(kv: Any, approval: Approval) -> None:
    """Write a yes on `approval` after its expiry, as a decider without the check would (its
    decision's own time set before the expiry), and make sure the write came after it."""
    await asyncio.sleep(max(0.0, (approval.expires_at - utcnow()).total_seconds() + 0.2))
    key = key_for(approval.approval_id)
    stored = await Approvals(kv).load(approval.approval_id)
    assert stored is not None and stored.value.state == "pending"
    yes = ApprovalDecision(
        decision="approved",
        by="ada",
        at=approval.expires_at - timedelta(seconds=1),
        digest=approval.digest,
    )
    decided = stored.value.model_copy(update={"state": "approved", "decisions": [yes]})
    assert await write_if(kv, key, decided, stored.revision) is not None


# --- the decider ------------------------------------------------------------------------------


async def test_a_decision_checked_in_time_but_stored_after_expiry_is_refused_as_expired(
    kv: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Approvals(kv)
    approval = await store.open(pending("r-late", "notify", {"message": "lunch"}, ttl=0.5))
    # The decider read its clock before the expiry; its write lands after it (it stalled).
    checked = utcnow()
    monkeypatch.setattr(records, "utcnow", lambda: checked)
    await asyncio.sleep(0.8)
    with pytest.raises(ApprovalExpired) as refused:
        await store.decide(approval.approval_id, "ada", "approved")
    assert refused.value.current.state == "expired"
    assert "expired at" in str(refused.value) and "counts as declined" in str(refused.value)
    stored = await store.load(approval.approval_id)
    assert stored is not None and stored.value.state == "expired"
    assert [(d.decision, d.by) for d in stored.value.decisions] == [("expired", "sidekick")]
    counted = await store.counted(approval.approval_id)
    assert counted is not None and counted.state == "expired"


async def test_a_decision_stored_in_time_stands_and_a_late_one_writes_the_expiry(kv: Any) -> None:
    store = Approvals(kv)
    timely = await store.open(pending("r-timely", "notify", {"message": "lunch"}, ttl=60))
    decided = await store.decide(timely.approval_id, "ada", "approved")
    assert decided.state == "approved"
    counted = await store.counted(timely.approval_id)
    assert counted is not None and counted.state == "approved"

    late = await store.open(pending("r-late-2", "notify", {"message": "tea"}, ttl=0.3))
    await asyncio.sleep(0.5)
    with pytest.raises(ApprovalExpired):
        await store.decide(late.approval_id, "ada", "approved")
    stored = await store.load(late.approval_id)
    assert stored is not None and stored.value.state == "expired"


# --- the workers ------------------------------------------------------------------------------


@pytest.fixture
async def deps(nats_server: NatsServer, fake_llm: FakeOpenAI) -> AsyncIterator[WorkerDeps]:
    made = await connected_deps(fake_llm, nats_server.url, "a" + uuid.uuid4().hex[:10])
    yield made
    await made.bus.broker.stop()


@pytest.fixture(autouse=True)
def _drafts(fake_llm: FakeOpenAI) -> None:
    fake_llm.script(
        "fake-worker",
        by_schema({"EmailDraft": lambda body: {"subject": SUBJECT, "body": BODY}}),
    )


def email_worker(deps: WorkerDeps, sendgrid: FakeSendGrid, approvals: str) -> EmailWorker:
    settings = WorkerSettings(
        sendgrid_api_key=sendgrid.key,
        sendgrid_from_email=SENDER,
        sendgrid_base_url=sendgrid.url,
        sendgrid_timeout=5,
        approvals=approvals,
    )
    return EmailWorker(deps, settings)


def email_task(request_id: str, to: str, attempt: int = 1, **update: Any) -> WorkerTask:
    made = task("EMAIL", "Email about Friday", request_id=request_id, to=to, subject=SUBJECT)
    return made.model_copy(update={"attempt": attempt, **update})


@pytest.mark.parametrize("late", [True, False])
async def test_the_email_worker_never_sends_on_a_yes_stored_after_expiry(
    deps: WorkerDeps, sendgrid: FakeSendGrid, late: bool
) -> None:
    kv = deps.bus.kv.approvals
    request_id = uuid.uuid4().hex
    arguments = {"to": "ada@example.com", "subject": SUBJECT, "body": BODY}
    approval = await Approvals(kv).open(
        pending(request_id, "email.send", arguments, ttl=0.5 if late else 60)
    )
    if late:
        await approved_late(kv, approval)
    else:
        await Approvals(kv).decide(approval.approval_id, "ada", "approved")
    named = email_task(request_id, "ada@example.com", 2, approval_id=approval.approval_id)
    done = await email_worker(deps, sendgrid, "email.send=ask").run(named)
    assert done.success, done
    if late:
        assert done.output.startswith('The email (to ada@example.com, subject "Friday") was not')
        assert "no one approved it before the approval expired" in done.output
        assert sendgrid.mails == []
    else:  # the control: the same approval, decided in time, sends
        assert done.output.startswith("Email sent to ada@example.com"), done.output
        assert len(sendgrid.mails) == 1


async def test_the_tools_gate_never_runs_a_call_approved_after_expiry(kv: Any) -> None:
    ran: list[str] = []

    async def push(args: NotifyArgs, call: Call) -> str:
        ran.append(args.message)
        return f"pushed {args.message}"

    toolbox = ToolBox([Tool("notify", "push", NotifyArgs, push)], result_chars=2000, call_timeout=5)
    approval = await Approvals(kv).open(pending("r-tool", "notify", {"message": "lunch"}, 0.5))
    await approved_late(kv, approval)
    after = task("TOOLS", "notify me", request_id="r-tool").model_copy(
        update={"attempt": 2, "approval_id": approval.approval_id}
    )
    gate = ToolGate(
        Policy.configured("notify=ask", None),
        after,
        approvals=lambda: kv,
        ledger=lambda: kv,
        mcp_names=frozenset(),
        time_limit=lambda action: 1.0,
    )
    run = RunContext(request_id="r-tool", session_id="s1", attempt=2)
    outcome = await gate(toolbox, "notify", json.dumps({"message": "lunch"}), Call(run, "c1"))
    assert isinstance(outcome, Outcome) and not outcome.ok
    assert outcome.content.startswith(
        "notify was not run (message: lunch): no one approved it before the approval expired"
    )
    assert ran == []


# --- whose words are written ------------------------------------------------------------------


async def test_a_models_question_naming_an_address_does_not_make_it_written(
    deps: WorkerDeps, sendgrid: FakeSendGrid
) -> None:
    """The request is parked on a model's question that names a look-alike address; the user
    answers "yes, go ahead". The next attempt's task (built by the orchestrator's loop) holds
    the question beside the answer, but only the answer is the user's: the email asks."""
    request_id = uuid.uuid4().hex
    routed = loop.start(
        RequestRouted(
            request_id=request_id,
            session_id="s1",
            message="email my boss at boss@company.com about friday",
            reason="email",
        ),
        3,
    )
    decision = OrchestratorDecision(
        worker_type="EMAIL",
        task_description="Email the boss about Friday",
        parameters=[
            Parameter(name="to", value="boss@company.co"),
            Parameter(name="subject", value=SUBJECT),
        ],
        success_criteria="The email is sent.",
    )
    state = loop.decided(routed, decision, Usage(), {"EMAIL"})
    question = "Shall I send it to boss@company.co, the address in your contacts?"
    asking = WorkerResult(
        request_id=request_id,
        session_id="s1",
        attempt=1,
        worker_type="EMAIL",
        success=False,
        clarification_questions=[question],
    )
    state = loop.on_result(state, asking)
    state = loop.answered(
        state,
        ClarificationAnswered(request_id=request_id, session_id="s1", message="yes, go ahead"),
    )
    (dispatch,) = loop.next_messages(state)
    assert isinstance(dispatch, Dispatch)
    next_task = dispatch.task
    assert next_task.clarifications == [f"Q: {question} A: yes, go ahead"]
    assert next_task.answers == ["yes, go ahead"]

    done = await email_worker(deps, sendgrid, "email.send=allow").run(next_task)
    assert not done.success and done.approval is not None, done
    assert done.approval.reason == "you did not write boss@company.co in this conversation"
    assert sendgrid.mails == []
