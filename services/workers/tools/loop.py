"""The tool loop as plain logic: ask the model, run the tools it calls, hand back the results,
until it answers or the step budget is spent.

Before each model call the request's budget (the task's `budget`) is checked, with the call's
own maximum counted in advance (its prompt, estimated, and its reply's `call_max` tokens): a call
that could pass it is not made, and the loop stops saying which limit. The same check goes to
`chat` as the LLM client's budget guard, so a fallback's call is checked too. Before each tool
call the budget's tool calls are checked: once they are spent the tools asked for are not run
(the model is told so) and the model is asked to answer with what it has, without tools.

Each tool call goes through `guard` (the operator's approval policy): it may run, be refused
(a tool result says why), or stop the loop to ask a person, with nothing run. A call of one of
the client's own tools (AG-UI frontend tools) is handed off: the rest of the turn's calls run,
then the loop stops with the calls for the client and the conversation so far (tools/frontend.py).
A conversation carried from an earlier attempt (`carried`) goes on after the prompt.

A step is one model turn. When the model answers without tool calls, that is the answer. When
the last allowed turn still asks for tools, the loop stops without running them and says so:
it never presents an unfinished task as done.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from openai.types.chat import ChatCompletionMessageParam

from contracts import Usage
from contracts.approvals import ApprovalAsk
from contracts.events import TaskBudget
from contracts.frontend import FrontendStop, ToolCall
from services.runtime.base.errors import BudgetSpent
from services.runtime.budgets.asks import prompt_estimate
from services.runtime.budgets.guard import guard as budget_guard
from services.runtime.budgets.guard import over as _over
from services.runtime.budgets.guard import tools_over
from services.runtime.llm import BudgetGuard, ChatReply
from services.workers.tools.frontend import HandOff, as_transcript
from services.workers.tools.toolbox import Call, Outcome, RunContext, ToolBox

ANSWER_NOW = "Answer the user now with what you have; no more tools can run."
# One model turn: the conversation, the tools offered, and the budget guard of its HTTP calls.
ChatFn = Callable[
    [list[ChatCompletionMessageParam], list[dict[str, Any]], BudgetGuard | None],
    Awaitable[ChatReply],
]
# Runs one call in the toolbox's place (the approval gate, tools/gate.py): its outcome (a
# HandOff for a call the client runs itself: the loop stops after the turn), or an ApprovalAsk
# when it may not run without a person's approval (then the loop stops).
Guard = Callable[[ToolBox, str, str, Call], Awaitable[Outcome | ApprovalAsk]]
# Told of each call after it ran: (call id, tool, arguments as JSON text, result, ok).
CallSeen = Callable[[str, str, str, str, bool], Awaitable[None]]


async def _unguarded(toolbox: ToolBox, name: str, arguments: str, call: Call) -> Outcome:
    return await toolbox.call(name, arguments, call)


async def _unseen(call_id: str, tool: str, arguments: str, result: str, ok: bool) -> None:
    return None


@dataclass(frozen=True)
class CallRecord:
    step: int
    tool: str
    ok: bool


@dataclass
class LoopOutcome:
    answer: str | None  # None when the loop stopped at the step limit
    steps: int
    usage: Usage = field(default_factory=Usage)
    calls: list[CallRecord] = field(default_factory=list)
    wanted: list[str] = field(default_factory=list)  # tools still asked for when it stopped
    over_budget: str | None = None  # the limit that stopped it before its next model call
    tool_limit: str | None = None  # the tool-call limit that stopped its tools, if one did
    approval: ApprovalAsk | None = None  # the call that stopped it to ask a person first
    frontend: FrontendStop | None = None  # the client's tool calls that stopped it

    @property
    def finished(self) -> bool:
        return self.answer is not None

    def summary(self) -> str:
        """Which tools ran, e.g. 'browser_text (2 calls), python_run (1 failed)'."""
        counts: dict[str, list[int]] = {}
        for record in self.calls:
            n = counts.setdefault(record.tool, [0, 0])
            n[0] += 1
            n[1] += 0 if record.ok else 1
        parts = []
        for tool, (total, failed) in counts.items():
            details = [f"{total} calls"] if total > 1 else []
            details += [f"{failed} failed"] if failed else []
            parts.append(f"{tool} ({', '.join(details)})" if details else tool)
        return ", ".join(parts) or "no tools"


async def run_tool_loop(
    chat: ChatFn,
    messages: list[ChatCompletionMessageParam],
    toolbox: ToolBox,
    run: RunContext,
    *,
    max_steps: int,
    budget: TaskBudget | None = None,
    seen: CallSeen = _unseen,
    call_max: int = 0,
    guard: Guard = _unguarded,
    carried: list[ChatCompletionMessageParam] | None = None,
) -> LoopOutcome:
    conversation = [*messages, *(carried or [])]
    outcome = LoopOutcome(answer=None, steps=0)
    definitions = toolbox.definitions
    for step in range(1, max_steps + 1):
        ahead = prompt_estimate(conversation, definitions) + call_max if call_max else 0
        outcome.over_budget = _over(budget, outcome.usage, ahead)
        if outcome.over_budget is not None:  # checked before each call: never one more
            return outcome
        try:
            reply = await chat(conversation, definitions, budget_guard(budget, outcome.usage))
        except BudgetSpent as exc:  # the guard refused one of the turn's HTTP calls
            outcome.usage = outcome.usage + exc.usage
            outcome.over_budget = exc.note
            return outcome
        outcome.steps = step
        outcome.usage = outcome.usage + reply.usage
        if not reply.tool_calls:
            outcome.answer = reply.content
            return outcome
        if step == max_steps:
            outcome.wanted = [c.name for c in reply.tool_calls]
            return outcome
        conversation.append(reply.as_param())
        handed: list[ToolCall] = []  # the client's calls of this turn
        for tool_call in reply.tool_calls:
            outcome.tool_limit = outcome.tool_limit or tools_over(budget, outcome.usage)
            if outcome.tool_limit is not None:
                not_run = f"Not run: this request's {outcome.tool_limit} is spent. {ANSWER_NOW}"
                conversation.append(
                    {"role": "tool", "tool_call_id": tool_call.id, "content": not_run}
                )
                continue
            result = await guard(
                toolbox, tool_call.name, tool_call.arguments, Call(run, tool_call.id)
            )
            if isinstance(result, ApprovalAsk):  # nothing ran; the request parks on it
                outcome.approval = result
                return outcome
            outcome.usage = outcome.usage + Usage(tool_calls=1)
            if isinstance(result, HandOff):  # the client runs it; its result comes later
                handed.append(result.call)
                outcome.calls.append(CallRecord(step, tool_call.name, True))
                continue
            outcome.calls.append(CallRecord(step, tool_call.name, result.ok))
            await seen(tool_call.id, tool_call.name, tool_call.arguments, result.content, result.ok)
            # Tool output is data in a tool message, never part of a system prompt.
            conversation.append(
                {"role": "tool", "tool_call_id": tool_call.id, "content": result.content}
            )
        if handed:  # the request parks until the client's results come
            transcript = as_transcript(conversation[len(messages) :])
            outcome.frontend = FrontendStop(calls=handed, transcript=transcript)
            return outcome
        if outcome.tool_limit is not None:
            definitions = []  # the next turn answers with what it has
    return outcome
