"""GENERAL: one model call; on retries the evaluator's feedback is part of the input."""

from __future__ import annotations

from contracts import Usage, WorkerResult, WorkerTask
from services.runtime.base.errors import MODEL_ERRORS, BudgetSpent
from services.runtime.budgets.guard import guard, refused
from services.runtime.llm.prompts import conversation
from services.workers.base import WorkerDeps, result_for, task_prompt

SYSTEM = """You are one of Sidekick's workers. Do the task you are given thoroughly and \
accurately, and make the answer meet the success criteria. Answer in markdown."""


class GeneralWorker:
    kind = "GENERAL"

    def __init__(self, deps: WorkerDeps) -> None:
        self.llm = deps.llm

    async def run(self, task: WorkerTask) -> WorkerResult:
        prompt = task_prompt(task)
        try:
            done = await self.llm.complete(
                conversation(SYSTEM, task.history, prompt), budget=guard(task.budget, Usage())
            )
        except BudgetSpent as exc:
            return refused(task, exc)
        except MODEL_ERRORS as exc:
            return result_for(task, success=False, error=str(exc))
        return result_for(task, success=True, output=done.text, usage=done.usage)
