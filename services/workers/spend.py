"""The budget check every worker shares: before each HTTP model call, the task's `budget` (what
the request may still spend when the attempt started) against the attempt's usage so far, with
the call's own maximum counted in advance. The workers hand it to the LLM client as its budget
guard (`guard`), so a structured reply's repair call and a fallback's call are checked like the
first. A worker that is stopped makes no further call and says which limit in
`WorkerResult.budget_stop`; the orchestrator then ends the request partial with the best answer
so far and a note naming it."""

from __future__ import annotations

from contracts import Usage, WorkerResult, WorkerTask
from contracts.events import TaskBudget
from services.runtime.base.errors import BudgetSpent
from services.runtime.llm import BudgetGuard
from services.workers.base import result_for


def over(budget: TaskBudget | None, used: Usage, ahead: int = 0) -> str | None:
    """The limit the attempt's usage has reached, in words, or that the next call could pass
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
    """The tool-call limit the attempt's tool calls have reached, in words; None while another
    tool call fits."""
    if budget is None or budget.tool_calls is None or used.tool_calls < budget.tool_calls:
        return None
    return f"tool calls budget ({used.tool_calls} of the {budget.tool_calls} left to this request)"


def guard(budget: TaskBudget | None, before: Usage) -> BudgetGuard | None:
    """The LLM client's guard for one of the attempt's model calls: `before` is what the attempt
    used before it; the guard adds what this call's own HTTP calls used so far."""
    if budget is None:
        return None
    return lambda used, ahead: over(budget, before + used, ahead)


def refused(task: WorkerTask, exc: BudgetSpent, before: Usage | None = None) -> WorkerResult:
    """A one-call worker's result when its guard refused a model call: nothing to show, the
    usage of the calls made counted, the limit named."""
    error = f"stopped before its next model call: the request's {exc.note} is spent."
    usage = (before or Usage()) + exc.usage
    return result_for(task, success=False, error=error, usage=usage, budget_stop=exc.note)
