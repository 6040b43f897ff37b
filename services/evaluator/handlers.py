"""Evaluator handler: one verdict per (request, attempt)."""

from __future__ import annotations

import logging
from typing import Any

from contracts import EvaluationRequested, Usage, Verdict, VerdictIssued
from services.evaluator import prompts
from services.runtime.base.errors import MODEL_ERRORS, BudgetSpent
from services.runtime.budgets.guard import guard, stopped_text
from services.runtime.bus.core import Bus, answer_key
from services.runtime.llm import LLMClient
from services.runtime.llm.override import model_as
from services.runtime.llm.prompts import transcript

log = logging.getLogger("sidekick.evaluator")


class Evaluator:
    def __init__(self, bus: Bus, llm: LLMClient) -> None:
        self.bus = bus
        self.llm = llm

    async def handle(self, req: EvaluationRequested) -> None:
        text = prompts.judge_text(
            transcript=transcript(req.history),
            message=req.message,
            task=req.task_description,
            criteria=req.success_criteria,
            output=req.output,
            sources="\n".join(f"- {s.title} <{s.url}>" for s in req.sources) or "(none)",
            answered="\n".join(f"- {c}" for c in req.clarifications),
        )
        messages = [
            {"role": "system", "content": prompts.SYSTEM},
            {"role": "user", "content": text},
        ]
        # The request's budget is checked before each model call, an invalid verdict's repair too.
        check = guard(req.budget, Usage())
        try:
            with model_as(req.model):  # a replay's evaluator model, if it asked for one
                judged = await self.llm.structured(messages, Verdict, budget=check)  # type: ignore[arg-type]
        except BudgetSpent as exc:  # no verdict: the calls made are counted, the limit named
            log.info("no verdict for %s/%d: %s", req.request_id, req.attempt, exc.note)
            error = stopped_text(exc.note)
            await self._answer(req, error=error, usage=exc.usage, budget_stop=exc.note)
        except MODEL_ERRORS as exc:
            log.warning("no verdict for %s/%d: %s", req.request_id, req.attempt, exc)
            await self._answer(req, error=str(exc))
        else:
            await self._answer(req, verdict=judged.value, usage=judged.usage)

    async def exhausted(self, req: EvaluationRequested, exc: BaseException) -> None:
        await self._answer(req, error=f"the evaluator could not process this attempt: {exc}")

    async def _answer(self, req: EvaluationRequested, **outcome: Any) -> None:
        """Publish the verdict (or why there is none) on `req`'s attempt, once per attempt."""
        event = VerdictIssued(
            request_id=req.request_id,
            session_id=req.session_id,
            attempt=req.attempt,
            dispatch_token=req.dispatch_token,  # the orchestrator takes no verdict without it
            **outcome,
        )
        await self.bus.publish(
            event,
            self.bus.subjects.evaluation_completed,
            dedupe_key=answer_key(req.request_id, "verdict", req.attempt, req.dispatch_token),
        )
