"""Evaluator handler: one verdict per (request, attempt)."""

from __future__ import annotations

import logging

from contracts import EvaluationRequested, Verdict, VerdictIssued
from services.evaluator import prompts
from services.runtime.bus import Bus, msg_id
from services.runtime.errors import MODEL_ERRORS
from services.runtime.llm import LLMClient
from services.runtime.prompts import transcript

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
        try:
            judged = await self.llm.structured(messages, Verdict)  # type: ignore[arg-type]
        except MODEL_ERRORS as exc:
            log.warning("no verdict for %s/%d: %s", req.request_id, req.attempt, exc)
            event = VerdictIssued(
                request_id=req.request_id,
                session_id=req.session_id,
                attempt=req.attempt,
                error=str(exc),
            )
        else:
            event = VerdictIssued(
                request_id=req.request_id,
                session_id=req.session_id,
                attempt=req.attempt,
                verdict=judged.value,
                usage=judged.usage,
            )
        await self.bus.publish(
            event,
            self.bus.subjects.evaluation_completed,
            dedupe_key=msg_id(req.request_id, "verdict", req.attempt),
        )

    async def exhausted(self, req: EvaluationRequested, exc: BaseException) -> None:
        event = VerdictIssued(
            request_id=req.request_id,
            session_id=req.session_id,
            attempt=req.attempt,
            error=f"the evaluator could not process this attempt: {exc}",
        )
        await self.bus.publish(
            event,
            self.bus.subjects.evaluation_completed,
            dedupe_key=msg_id(req.request_id, "verdict", req.attempt),
        )
