"""The budget check before each HTTP model call, shared by the workers and the evaluator: the
step's `TaskBudget` (what the request may still spend when the step was sent) against the step's
usage so far, with the call's own maximum counted in advance. It is handed to the LLM client as
its budget guard (`guard`), so a structured reply's repair call and a fallback's call are checked
like the first; the client raises `BudgetSpent` naming the limit instead of making the call."""

from __future__ import annotations

from contracts import Usage
from contracts.events import TaskBudget
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
