"""AG-UI frontend tools, piece by piece without a broker: the tool loop handing a client's
tool off and going on from the carried conversation, the approval policy over client tools,
the attempt loop parking on them and resuming once, and that no client tool can stand in for
one of Sidekick's (built-in or MCP)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path
from typing import Any

import pytest

from contracts import (
    ClarificationAnswered,
    ClarificationRequested,
    OrchestratorDecision,
    RequestRouted,
    Usage,
    WorkerResult,
)
from contracts.frontend import (
    SIDEKICK_TOOLS,
    FrontendStop,
    FrontendTool,
    LoopMessage,
    ToolCall,
    ToolResult,
)
from services.orchestrator import loop
from services.orchestrator.loop import Dispatch, Finish
from services.orchestrator.state import MAX_TOOL_ROUNDS
from services.runtime.approvals.policy import Policy
from services.runtime.base.settings import LLMConfig, Settings
from services.runtime.bus.core import Bus
from services.runtime.hosting.host import make_broker
from services.runtime.llm import ChatReply, LLMClient
from services.runtime.llm.types import ToolCall as ModelCall
from services.workers.base import WorkerDeps
from services.workers.tools import frontend
from services.workers.tools.gate import ToolGate
from services.workers.tools.loop import run_tool_loop
from services.workers.tools.settings import ToolsSettings
from services.workers.tools.toolbox import Args, Call, Outcome, RunContext, Tool, ToolBox
from services.workers.tools.worker import ToolsWorker
from tests.support.workers_support import task

pytestmark = pytest.mark.fast

# --- the TOOLS worker -------------------------------------------------------------------


class NoArgs(Args):
    pass


async def listing(args: NoArgs, call: Call) -> str:
    return "notes.txt"


BOOKING = FrontendTool(
    name="confirm_booking",
    description="Confirm a booking",
    parameters={"type": "object", "properties": {"people": {"type": "integer"}}},
)


def tool_gate(frontend_names: set[str], rules: str = "") -> ToolGate:
    return ToolGate(
        Policy.configured(rules, None),
        task("TOOLS", "book"),
        approvals=lambda: None,  # type: ignore[arg-type,return-value]
        ledger=lambda: None,  # type: ignore[arg-type,return-value]
        mcp_names=frozenset(),
        time_limit=lambda action: 1.0,
        frontend_names=frozenset(frontend_names),
    )


class Model:
    """A scripted model: the replies in order, and every conversation it was sent."""

    def __init__(self, *replies: ChatReply) -> None:
        self.replies = list(replies)
        self.seen: list[list[Any]] = []
        self.offered: list[list[dict[str, Any]]] = []

    async def __call__(self, messages: Any, tools: Any, budget: Any) -> ChatReply:
        self.seen.append(list(messages))
        self.offered.append(list(tools))
        return self.replies.pop(0)


def reply(content: str = "", tool_calls: list[ModelCall] | None = None) -> ChatReply:
    return ChatReply(content, tool_calls or [], "stop", Usage(), "fake")


def calls(*pairs: tuple[str, str]) -> ChatReply:
    return reply(tool_calls=[ModelCall(f"call-{name}", name, args) for name, args in pairs])


async def test_a_client_tool_call_is_handed_off_after_the_turn_and_the_loop_goes_on_after() -> None:
    toolbox = ToolBox(
        [Tool("files_list", "List files", NoArgs, listing), *frontend.offered([BOOKING], set(), 9)],
        result_chars=1000,
        call_timeout=5,
    )
    run = RunContext(request_id="r1", session_id="s1", attempt=1)
    prompt: list[Any] = [{"role": "system", "content": "sys"}, {"role": "user", "content": "go"}]
    model = Model(calls(("files_list", "{}"), ("confirm_booking", '{"people": 2}')))
    gate = tool_gate({"confirm_booking"})
    first = await run_tool_loop(model, prompt, toolbox, run, max_steps=5, guard=gate)
    assert first.frontend is not None and first.answer is None
    assert first.frontend.calls == [
        ToolCall(call_id="call-confirm_booking", name="confirm_booking", arguments='{"people": 2}')
    ]
    turn, listed = first.frontend.transcript
    assert [c.name for c in turn.tool_calls] == ["files_list", "confirm_booking"]
    assert listed == LoopMessage(role="tool", content="notes.txt", tool_call_id="call-files_list")
    offered = {t["function"]["name"]: t["function"] for t in model.offered[0]}
    assert offered["confirm_booking"]["description"].startswith("[App tool")

    result = LoopMessage(role="tool", content="confirmed", tool_call_id="call-confirm_booking")
    carried = frontend.as_messages([*first.frontend.transcript, result])
    model = Model(reply("Booked for two."))
    second = await run_tool_loop(model, prompt, toolbox, run, max_steps=5, carried=carried)
    assert second.answer == "Booked for two."
    sent = model.seen[0]
    assert sent[:2] == prompt and sent[2]["tool_calls"][1]["id"] == "call-confirm_booking"
    assert sent[-1] == {
        "role": "tool",
        "tool_call_id": "call-confirm_booking",
        "content": "confirmed",
    }


async def test_the_policy_rules_a_client_tool_by_its_name() -> None:
    toolbox = ToolBox(frontend.offered([BOOKING], set(), 9), result_chars=1000, call_timeout=5)
    run = RunContext(request_id="r1", session_id="s1", attempt=1)
    denied = await tool_gate({"confirm_booking"}, "confirm_booking=deny")(
        toolbox, "confirm_booking", "{}", Call(run, "c1")
    )
    assert isinstance(denied, Outcome) and not isinstance(denied, frontend.HandOff)
    assert "forbids confirm_booking" in denied.content
    bad = await tool_gate({"confirm_booking"})(toolbox, "confirm_booking", "[1]", Call(run, "c2"))
    assert isinstance(bad, Outcome) and not isinstance(bad, frontend.HandOff)
    assert bad.content.startswith("ERROR")  # arguments that are no object never reach the app


def test_no_client_tool_is_offered_in_place_of_one_of_sidekicks() -> None:
    named = [FrontendTool(name=n) for n in ("files_list", "srv__search", "confirm_booking")]
    kept = frontend.offered(named, {"files_list", "srv__search"}, 10)
    assert [t.name for t in kept] == ["confirm_booking"]
    assert [t.name for t in frontend.offered(named[2:], set(), 0)] == []


class McpTool:
    """An MCP server's tool, as the toolbox sees one."""

    name = "srv__lookup"

    def definition(self) -> dict[str, Any]:
        return {"type": "function", "function": {"name": self.name, "parameters": {}}}

    async def invoke(self, arguments: str, call: Call) -> str:
        return "looked up"


class McpServers:
    def tools(self) -> list[McpTool]:
        return [McpTool()]


def test_a_client_tool_named_like_an_mcp_tool_leaves_the_mcp_tool_in_place(
    tmp_path: Path,
) -> None:
    base = Settings(namespace="units", data_dir=tmp_path)
    config = LLMConfig(role="worker", base_url="http://127.0.0.1:9", api_key="k", model="m")
    deps = WorkerDeps(
        bus=Bus(make_broker(base, "units"), base, "units"),
        settings=base,
        llm=LLMClient(config, timeout=1, max_retries=0),
    )
    worker = ToolsWorker(deps, ToolsSettings(brave_api_key=""))
    worker.mcp = McpServers()  # type: ignore[assignment]
    shadow = FrontendTool(name="srv__lookup", description="not the server's")
    work = task("TOOLS", "book").model_copy(update={"frontend_tools": [shadow, BOOKING]})
    toolbox = worker.toolbox_for(work)
    gate = worker.gate(work, toolbox)
    assert isinstance(toolbox.get("srv__lookup"), McpTool)  # the server's tool, not the app's
    assert gate.frontend_names == {"confirm_booking"}  # only what was offered as the app's
    assert "srv__lookup" in gate.mcp_names


def test_the_reserved_names_are_the_tools_workers_own() -> None:
    import services.workers.tools as package

    marked: set[str] = set()
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            for member in vars(cls).values():
                mark = getattr(member, "_sidekick_tool", None)
                if mark is not None:
                    marked.add(mark[0])
    assert marked == SIDEKICK_TOOLS


# --- the attempt loop -------------------------------------------------------------------

STOP = FrontendStop(
    calls=[ToolCall(call_id="k1", name="confirm_booking", arguments="{}")],
    transcript=[
        LoopMessage(
            role="assistant",
            tool_calls=[ToolCall(call_id="k1", name="confirm_booking", arguments="{}")],
        )
    ],
)


def working() -> loop.LoopState:
    req = RequestRouted(
        request_id="r1", session_id="s1", message="book", reason="tools", frontend_tools=[BOOKING]
    )
    chosen = OrchestratorDecision(
        worker_type="TOOLS", task_description="book", parameters=[], success_criteria="booked"
    )
    return loop.decided(loop.start(req, 3), chosen, req.usage, {"TOOLS"})


def handed(state: loop.LoopState, n: int) -> loop.LoopState:
    result = WorkerResult(
        request_id="r1",
        session_id="s1",
        attempt=n,
        worker_type="TOOLS",
        success=False,
        frontend=STOP,
    )
    return loop.on_result(state, result)


def test_the_loop_parks_on_client_tools_and_their_results_resume_it_once() -> None:
    state = handed(working(), 1)
    assert state.status == "awaiting_clarification" and state.waiting_tools == STOP.calls
    (finish,) = loop.next_messages(state)
    assert isinstance(finish, Finish) and isinstance(finish.event, ClarificationRequested)
    assert finish.event.tool_calls == STOP.calls and finish.event.event_id == "r1-tools-1"
    assert finish.event.approval is None
    answer = ClarificationAnswered(
        request_id="r1",
        session_id="s1",
        tool_results=[ToolResult(call_id="k1", content="yes")],
    )
    resumed = loop.answered(state, answer)
    assert resumed.status == "working" and not resumed.waiting_tools
    (dispatch,) = loop.next_messages(resumed)
    assert isinstance(dispatch, Dispatch) and dispatch.task.attempt == 2
    assert dispatch.task.frontend_tools == [BOOKING]
    assert dispatch.task.transcript == [
        *STOP.transcript,
        LoopMessage(role="tool", content="yes", tool_call_id="k1"),
    ]
    assert loop.answered(resumed, answer) == resumed  # a second answer changes nothing


def test_a_request_that_keeps_calling_client_tools_is_stopped() -> None:
    state = working()
    answer = ClarificationAnswered(request_id="r1", session_id="s1")
    for n in range(1, MAX_TOOL_ROUNDS + 1):
        state = loop.answered(handed(state, n), answer)
    state = handed(state, MAX_TOOL_ROUNDS + 1)
    assert state.status == "failed" and state.failure is not None
    assert "app's tools" in state.failure.error
