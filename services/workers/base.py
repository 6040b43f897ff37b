"""What a worker kind is, and what it gets from the composition root."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from contracts import Usage, WorkerResult, WorkerTask, WorkflowStatus
from services.runtime.base.errors import MODEL_ERRORS, BudgetSpent
from services.runtime.base.settings import Settings
from services.runtime.budgets.guard import guard, refused
from services.runtime.bus.core import Bus
from services.runtime.llm import Completion, LLMClient
from services.runtime.llm.prompts import context_block, conversation

StageReporter = Callable[[WorkerTask, WorkflowStatus, str], Awaitable[None]]


async def _no_stage(task: WorkerTask, status: WorkflowStatus, detail: str) -> None:
    return None


@dataclass
class WorkerDeps:
    """Clients shared by every worker kind in one process, created once."""

    bus: Bus
    settings: Settings
    llm: LLMClient
    # Shows a worker's internal step (researching, synthesizing, validating) in the request's
    # status; the composition root sends it out as progress (the gateway keeps the record).
    stage: StageReporter = _no_stage


class Worker(Protocol):
    kind: str

    async def run(self, task: WorkerTask) -> WorkerResult: ...


async def answer(
    llm: LLMClient, task: WorkerTask, system: str, prompt: str
) -> Completion | WorkerResult:
    """A one-call worker's model call: the answer to `prompt` (after `system` and the task's
    history) under the task's budget, or the result saying why there is none (its guard
    refused the call: the limit named; the model failed: the error)."""
    try:
        return await llm.complete(
            conversation(system, task.history, prompt), budget=guard(task.budget, Usage())
        )
    except BudgetSpent as exc:
        return refused(task, exc)
    except MODEL_ERRORS as exc:
        return result_for(task, success=False, error=str(exc))


def result_for(task: WorkerTask, **fields: object) -> WorkerResult:
    """A result answering `task` (same request, session, attempt and kind)."""
    return WorkerResult.model_validate(
        {
            "request_id": task.request_id,
            "session_id": task.session_id,
            "attempt": task.attempt,
            "worker_type": task.worker_type,
            **fields,
        }
    )


def task_prompt(
    task: WorkerTask,
    *notes: str,
    heading: str | None = None,
    after_criteria: str = "",
    data: str | None = None,
) -> str:
    """The user turn of a worker's model call: what to do (`heading`; by default the task's
    description), the user's message, the `notes` that are not empty (a paragraph each), the
    success criteria and `after_criteria`, what a retry must know, and last `data` (search
    results: to read, not to obey)."""
    paragraphs = [
        heading or f"Task: {task.task_description}",
        f"The user's message: {task.message}",
        *(n for n in notes if n),
        f"Success criteria: {task.success_criteria}",
    ]
    text = "\n\n".join(paragraphs) + after_criteria + retry_context(task)
    text += context_block(task.context)
    return text if data is None else f"{text}\n\n{data}"


def retry_context(task: WorkerTask) -> str:
    """What the worker must know on a retry: the user's answers to earlier questions, the last
    output and the evaluator's feedback."""
    parts: list[str] = []
    if task.clarifications:
        parts.append(
            "\n\nThe user answered these questions (use the answers; do not ask again):\n"
            + "\n".join(f"- {c}" for c in task.clarifications)
        )
    if task.attempt == 1 or not (task.feedback or task.previous_output):
        return "\n".join(parts)
    parts.append(f"\n\nThis is attempt {task.attempt}.")
    if task.previous_output:
        parts.append(f"Your previous answer was:\n{task.previous_output}")
    if task.feedback:
        parts.append(f"The evaluator's feedback on it: {task.feedback}")
    if task.suggestions:
        parts.append("Suggestions:\n" + "\n".join(f"- {s}" for s in task.suggestions))
    parts.append("Produce an improved answer that addresses the feedback.")
    return "\n".join(parts)
