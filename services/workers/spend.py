"""The budget check every worker shares (services/runtime/requests/guards.py, which the
evaluator uses too): before each HTTP model call, the task's `budget` (what the request may
still spend when the attempt started) against the attempt's usage so far, with the call's own
maximum counted in advance. The workers hand it to the LLM client as its budget guard (`guard`),
so a structured reply's repair call and a fallback's call are checked like the first. A worker
that is stopped makes no further call and says which limit in `WorkerResult.budget_stop`; the
orchestrator then ends the request partial with the best answer so far and a note naming it."""

from __future__ import annotations

from contracts import Usage, WorkerResult, WorkerTask
from services.runtime.base.errors import BudgetSpent
from services.runtime.requests.guards import guard, over, tools_over
from services.workers.base import result_for

__all__ = ["guard", "over", "refused", "tools_over"]  # the checks live in runtime's guards.py


def refused(task: WorkerTask, exc: BudgetSpent, before: Usage | None = None) -> WorkerResult:
    """A one-call worker's result when its guard refused a model call: nothing to show, the
    usage of the calls made counted, the limit named."""
    error = f"stopped before its next model call: the request's {exc.note} is spent."
    usage = (before or Usage()) + exc.usage
    return result_for(task, success=False, error=error, usage=usage, budget_stop=exc.note)
