"""The tools worker's approval gate as plain logic, in memory: the policy's answer for each call,
a decided approval found again by a later attempt, an approved call run once and replayed after,
a changed call asked anew, a decline for every call of its action, a call that could not run
never asked about, and the browser asking only for a host not yet opened. The same on live
services: tests/approvals/test_tools.py."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import nats.js.errors
import pytest
from pydantic import Field

from contracts import utcnow
from contracts.approvals import Approval, ApprovalAsk
from services.runtime.approvals.policy import Policy
from services.runtime.approvals.records import Approvals, Verdict, approval_id
from services.workers.tools.browser import NavigateArgs
from services.workers.tools.gate import ToolGate
from services.workers.tools.notify import NotifyArgs
from services.workers.tools.toolbox import Args, Call, Outcome, RunContext, Tool, ToolBox
from tests.support.memory import MemoryKV, MemoryStore
from tests.support.workers_support import task

pytestmark = pytest.mark.fast

POLICY = "notify=ask;python_run=deny;browser.new_domain=ask"


class CodeArgs(Args):
    code: str = Field(min_length=1)


async def keys(kv: MemoryKV) -> list[str]:
    try:
        return await kv.keys()
    except nats.js.errors.NoKeysError:
        return []


class Rig:
    """A toolbox whose tools only record their calls, and the buckets the gate reads."""

    def __init__(self) -> None:
        store = MemoryStore()
        self.approvals: MemoryKV = store.bucket("approvals")
        self.ledger: MemoryKV = store.bucket("ledger")
        self.ran: list[str] = []

        async def push(args: NotifyArgs, call: Call) -> str:
            self.ran.append(f"notify {args.message}")
            return f"pushed {args.message}"

        async def run(args: CodeArgs, call: Call) -> str:
            self.ran.append("python_run")
            return "ran"

        async def navigate(args: NavigateArgs, call: Call) -> str:
            self.ran.append(f"open {args.url}")
            return f"Opened {args.url}"

        self.toolbox = ToolBox(
            [
                Tool("notify", "push", NotifyArgs, push),
                Tool("python_run", "run", CodeArgs, run),
                Tool("browser_navigate", "open", NavigateArgs, navigate),
            ],
            result_chars=2000,
            call_timeout=5,
        )

    def gate(self, attempt: int = 1, approval: str | None = None) -> ToolGate:
        task_ = task("TOOLS", "notify me", request_id="r1").model_copy(
            update={"attempt": attempt, "approval_id": approval}
        )
        return ToolGate(
            Policy.configured(POLICY, None),
            task_,
            approvals=lambda: self.approvals,  # type: ignore[arg-type,return-value]
            ledger=lambda: self.ledger,  # type: ignore[arg-type,return-value]
            mcp_names=frozenset(),
            time_limit=lambda action: 1.0,
        )

    async def call(self, gate: ToolGate, name: str, **args: Any) -> Outcome | ApprovalAsk:
        run = RunContext(request_id="r1", session_id="s1", attempt=gate.task.attempt)
        return await gate(self.toolbox, name, json.dumps(args), Call(run, "call_1"))

    async def decide(self, ask: ApprovalAsk, attempt: int, verdict: Verdict) -> str:
        """Open the approval the orchestrator would for `ask`, and record `verdict` on it."""
        key = approval_id("r1", attempt, ask.digest)
        approvals = Approvals(self.approvals)  # type: ignore[arg-type]
        await approvals.open(
            Approval(
                approval_id=key,
                request_id="r1",
                attempt=attempt,
                approvers=["ada"],
                action=ask.action,
                arguments=ask.arguments,
                digest=ask.digest,
                reason=ask.reason,
                expires_at=utcnow() + timedelta(hours=1),  # decided before its expiry
            )
        )
        await approvals.decide(key, "ada" if verdict != "expired" else "sidekick", verdict)
        return key


async def test_an_asked_call_runs_nothing_and_once_approved_runs_once_however_often_called() -> (
    None
):
    rig = Rig()
    asked = await rig.call(rig.gate(), "notify", message="lunch")
    assert isinstance(asked, ApprovalAsk) and rig.ran == []
    assert (asked.action, asked.arguments) == ("notify", {"message": "lunch"})
    key = await rig.decide(asked, 1, "approved")
    after = rig.gate(attempt=2, approval=key)
    first = await rig.call(after, "notify", message="lunch")
    again = await rig.call(after, "notify", message="lunch")
    later = await rig.call(rig.gate(attempt=3), "notify", message="lunch")  # a later attempt
    assert first == Outcome("pushed lunch", ok=True)
    assert isinstance(again, Outcome) and isinstance(later, Outcome)
    assert again.content.endswith("(This approved notify call already ran; it was not run again.)")
    assert later == again
    assert rig.ran == ["notify lunch"]
    assert json.loads((await rig.ledger.get(f"notify.approved.{key}")).value or b"")["state"] == (
        "succeeded"
    )


async def test_a_changed_call_after_a_yes_asks_anew_and_never_runs_on_the_old_approval() -> None:
    rig = Rig()
    asked = await rig.call(rig.gate(), "notify", message="lunch at 12")
    assert isinstance(asked, ApprovalAsk)
    key = await rig.decide(asked, 1, "approved")
    changed = await rig.call(rig.gate(attempt=2, approval=key), "notify", message="lunch at 1")
    assert isinstance(changed, ApprovalAsk) and rig.ran == []
    assert changed.digest != asked.digest
    assert changed.reason.startswith("these are not the arguments of notify that were approved")
    assert await keys(rig.ledger) == []


@pytest.mark.parametrize("verdict", ["denied", "expired"])
async def test_a_declined_approval_answers_every_call_of_its_action_and_nothing_runs(
    verdict: Verdict,
) -> None:
    rig = Rig()
    asked = await rig.call(rig.gate(), "notify", message="lunch")
    assert isinstance(asked, ApprovalAsk)
    key = await rig.decide(asked, 1, verdict)
    gate = rig.gate(attempt=2, approval=key)
    same = await rig.call(gate, "notify", message="lunch")
    other = await rig.call(gate, "notify", message="dinner")
    assert isinstance(same, Outcome) and isinstance(other, Outcome)
    assert not same.ok and not other.ok
    said = (
        "The user declined to run notify (message: lunch); it was not run."
        if verdict == "denied"
        else "notify was not run (message: lunch): no one approved it before the approval expired"
    )
    assert same.content.startswith(said) and other.content.startswith(said)
    assert rig.ran == []


async def test_a_denied_tool_is_not_run_and_a_call_that_cannot_run_is_never_asked_about() -> None:
    rig = Rig()
    denied = await rig.call(rig.gate(), "python_run", code="print(1)")
    assert denied == Outcome(
        "ERROR: the operator's approval policy forbids python_run (the variable approval "
        "policy says deny for python_run); it was not run.",
        ok=False,
    )
    empty = await rig.call(rig.gate(), "notify", message="")
    assert isinstance(empty, Outcome) and empty.content.startswith(
        "ERROR: invalid arguments for notify: message:"
    )
    assert rig.ran == [] and await keys(rig.approvals) == []


async def test_the_browser_asks_for_a_new_host_only_and_an_opened_one_opens_freely() -> None:
    rig = Rig()
    asked = await rig.call(rig.gate(), "browser_navigate", url="https://a.example/one")
    assert isinstance(asked, ApprovalAsk)
    assert (asked.action, asked.arguments) == ("browser.new_domain", {"domain": "a.example"})
    assert "the browser would open https://a.example/one, on a host not opened" in asked.reason
    key = await rig.decide(asked, 1, "approved")
    gate = rig.gate(attempt=2, approval=key)
    one = await rig.call(gate, "browser_navigate", url="https://a.example/one")
    two = await rig.call(gate, "browser_navigate", url="http://WWW.A.example:8080/two")
    other = await rig.call(gate, "browser_navigate", url="https://b.example/")
    assert isinstance(one, Outcome) and isinstance(two, Outcome) and one.ok and two.ok
    assert isinstance(other, ApprovalAsk) and other.arguments == {"domain": "b.example"}
    assert rig.ran == ["open https://a.example/one", "open http://WWW.A.example:8080/two"]
    assert await keys(rig.ledger) == []  # opening a host is not an effect to do once
