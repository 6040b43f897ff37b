"""The budget check before each HTTP model call, handed to the LLM client as its budget guard,
so a structured reply's repair call and a fallback's call are checked like the first; the client
raises `BudgetSpent` naming the limit instead of making the call.

A worker's or an evaluation's step was held by the orchestrator, which sent what the request
may still spend with it (`TaskBudget`): `guard` checks the step's usage so far against that,
with the call's own maximum counted in advance (`over`, `tools_over` for tool calls), and
`refused` is a one-call worker's result when its guard refused. The orchestrator's decision is
checked against the request's own limits (`request_guard`, handed out by its step's meter).
A worker or an evaluator that is stopped makes no further call and says which limit
(`WorkerResult.budget_stop`, `VerdictIssued.budget_stop`); the orchestrator then ends the
request partial with the best answer so far and a note naming it."""

from __future__ import annotations

import time
from datetime import datetime

from contracts import Usage, WorkerResult, WorkerTask
from contracts.base import TaskBudget
from services.runtime.base.errors import BudgetSpent
from services.runtime.base.settings import Settings
from services.runtime.budgets.limits import request_limit
from services.runtime.budgets.prices import Table
from services.runtime.llm import BudgetGuard


def over(budget: TaskBudget | None, used: Usage, ahead: int = 0) -> str | None:
    """The limit the step's usage has reached, in words, or that the next call could pass
    (`ahead`: its maximum, counted in advance); None while another call fits."""
    if budget is None:
        return None
    if used.calls >= budget.calls:
        return f"model calls budget ({used.calls} of the {budget.calls} left to this request)"
    spent = used.input_tokens + used.output_tokens
    if spent >= budget.tokens or spent + ahead > budget.tokens:
        could = f", and the next call could take {ahead} more" if ahead else ""
        return f"tokens budget ({spent} of the {budget.tokens} left to this request{could})"
    return None


def tools_over(budget: TaskBudget | None, used: Usage) -> str | None:
    """The tool-call limit the step's tool calls have reached, in words; None while another
    tool call fits."""
    if budget is None or budget.tool_calls is None or used.tool_calls < budget.tool_calls:
        return None
    return f"tool calls budget ({used.tool_calls} of the {budget.tool_calls} left to this request)"


def guard(budget: TaskBudget | None, before: Usage) -> BudgetGuard | None:
    """The LLM client's guard for one of the step's model calls: `before` is what the step
    used before it; the guard adds what this call's own HTTP calls used so far."""
    if budget is None:
        return None
    return lambda used, ahead: over(budget, before + used, ahead)


def request_guard(
    settings: Settings, table: Table, started: datetime, before: Usage, rate: float
) -> BudgetGuard:
    """The guard of a call checked against the request's own limits (the decision's): its
    spend (`before`, and this call's HTTP calls so far), its wall time since `started`, and
    the next HTTP call's maximum priced at `rate` per token, counted in advance."""

    def check(used: Usage, ahead: int) -> str | None:
        seconds = time.time() - started.timestamp()
        usd = round(ahead * rate, 6)
        limit = request_limit(settings, before + used, seconds, table, (ahead, usd))
        return limit.note() if limit is not None else None

    return check


def stopped_text(note: str) -> str:
    """Why a step stopped before its next model call, in words."""
    return f"stopped before its next model call: the request's {note} is spent."


def refused(task: WorkerTask, exc: BudgetSpent, before: Usage | None = None) -> WorkerResult:
    """A one-call worker's result when its guard refused a model call: nothing to show, the
    usage of the calls made counted, the limit named."""
    return WorkerResult(
        request_id=task.request_id,
        session_id=task.session_id,
        attempt=task.attempt,
        worker_type=task.worker_type,
        success=False,
        error=stopped_text(exc.note),
        usage=(before or Usage()) + exc.usage,
        budget_stop=exc.note,
    )
