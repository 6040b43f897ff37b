"""GENERAL: one model call; on retries the evaluator's feedback is part of the input."""

from __future__ import annotations

from contracts import WorkerResult, WorkerTask
from services.workers.base import WorkerDeps, answer, result_for, task_prompt

SYSTEM = """You are one of Sidekick's workers. Do the task you are given thoroughly and \
accurately, and make the answer meet the success criteria. Answer in markdown."""


class GeneralWorker:
    kind = "GENERAL"

    def __init__(self, deps: WorkerDeps) -> None:
        self.llm = deps.llm

    async def run(self, task: WorkerTask) -> WorkerResult:
        done = await answer(self.llm, task, SYSTEM, task_prompt(task))
        if isinstance(done, WorkerResult):
            return done
        return result_for(task, success=True, output=done.text, usage=done.usage)
