"""GENERAL: one model call; on retries the evaluator's feedback is part of the input."""

from __future__ import annotations

from contracts import WorkerResult, WorkerTask
from services.runtime.base.errors import MODEL_ERRORS
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
            done = await self.llm.complete(conversation(SYSTEM, task.history, prompt))
        except MODEL_ERRORS as exc:
            return result_for(task, success=False, error=str(exc))
        return result_for(task, success=True, output=done.text, usage=done.usage)
