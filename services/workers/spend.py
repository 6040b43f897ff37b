"""The in-loop budget check every worker that makes more than one model call per task shares
(the tools loop, research): before each model call, the task's `budget` (what the request may
still spend when the attempt started) against the attempt's usage so far. A worker that is
stopped makes no further call and says which limit in `WorkerResult.budget_stop`; the
orchestrator then ends the request partial with the best answer so far and a note naming it."""

from __future__ import annotations

from contracts import Usage
from contracts.events import TaskBudget


def over(budget: TaskBudget | None, used: Usage) -> str | None:
    """The limit the attempt's usage has reached, in words; None while another call fits."""
    if budget is None:
        return None
    if used.calls >= budget.calls:
        return f"model calls budget ({used.calls} of the {budget.calls} left to this request)"
    if used.input_tokens + used.output_tokens >= budget.tokens:
        spent = used.input_tokens + used.output_tokens
        return f"tokens budget ({spent} of the {budget.tokens} left to this request)"
    return None
