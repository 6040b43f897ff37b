"""Orchestrator handlers: fold each event into the request's state (CAS in KV), then publish
what the state says comes next."""

from __future__ import annotations

import logging
from collections.abc import Callable

from contracts import (
    OrchestratorDecision,
    Progress,
    RequestRouted,
    VerdictIssued,
    WorkerResult,
)
from services.orchestrator import loop, prompts
from services.orchestrator.loop import Dispatch, Evaluate, Finish, RequestState
from services.runtime.bus import Bus, msg_id
from services.runtime.errors import MODEL_ERRORS
from services.runtime.failures import failure_code
from services.runtime.kvstore import get_model, mutate
from services.runtime.llm import LLMClient
from services.runtime.metrics import ATTEMPTS, EVAL_SCORE, VERDICTS
from services.runtime.outcomes import finish
from services.runtime.prompts import conversation

log = logging.getLogger("sidekick.orchestrator")


class Orchestrator:
    def __init__(self, bus: Bus, llm: LLMClient, workers: list[str]) -> None:
        self.bus = bus
        self.llm = llm
        self.workers = workers

    async def on_routed(self, req: RequestRouted) -> None:
        max_attempts = self.bus.settings.max_attempts
        state = await mutate(
            self.bus.kv.requests,
            req.request_id,
            RequestState,
            lambda cur: loop.start(req, max_attempts) if cur is None else None,
        )
        assert state is not None
        if state.status == "deciding":
            try:
                decision = await self.llm.structured(
                    conversation(
                        prompts.system_prompt(self.workers),
                        req.history,
                        prompts.request_text(req.message, req.reason, req.success_criteria),
                    ),
                    OrchestratorDecision,
                )
            except MODEL_ERRORS as exc:
                code, error = failure_code(exc), str(exc)
                state = await self._update(req.request_id, lambda s: loop.failed(s, code, error))
            else:
                known = set(self.workers)
                state = await self._update(
                    req.request_id,
                    lambda s: loop.decided(s, decision.value, decision.usage, known),
                )
                if state.decision is not None:
                    await self._progress(
                        state,
                        "decided",
                        f"{state.decision.worker_type}: {state.decision.task_description}",
                    )
        await self._advance(state)

    async def on_result(self, result: WorkerResult) -> None:
        state = await self._update(result.request_id, lambda s: loop.on_result(s, result))
        await self._advance(state)

    async def on_verdict(self, event: VerdictIssued) -> None:
        state = await self._update(event.request_id, lambda s: loop.on_verdict(s, event))
        if event.verdict is not None:
            await self._progress(
                state,
                "evaluated",
                event.verdict.feedback,
                attempt=event.attempt,
                passed=event.verdict.passed,
                score=event.verdict.score,
                feedback=event.verdict.feedback,
                suggestions=list(event.verdict.suggestions),
            )
        await self._advance(state)

    async def exhausted_routed(self, req: RequestRouted, exc: BaseException) -> None:
        await self._give_up(req.request_id, exc)

    async def exhausted_result(self, ev: WorkerResult, exc: BaseException) -> None:
        await self._give_up(ev.request_id, exc)

    async def exhausted_verdict(self, ev: VerdictIssued, exc: BaseException) -> None:
        await self._give_up(ev.request_id, exc)

    async def _give_up(self, request_id: str, exc: BaseException) -> None:
        error = f"The orchestrator could not continue this request: {exc}"
        state = await self._update(
            request_id, lambda s: loop.failed(s, "delivery_exhausted", error)
        )
        await self._advance(state)

    async def _update(
        self, request_id: str, change: Callable[[RequestState], RequestState]
    ) -> RequestState:
        def apply(cur: RequestState | None) -> RequestState | None:
            if cur is None:
                raise LookupError(f"no state for request {request_id}")
            new = change(cur)
            return None if new == cur else new

        state = await mutate(self.bus.kv.requests, request_id, RequestState, apply)
        assert state is not None
        return state

    async def _advance(self, state: RequestState) -> None:
        for message in loop.next_messages(state):
            if isinstance(message, Dispatch):
                task = message.task
                await self._progress(
                    state,
                    "attempt_started",
                    f"attempt {task.attempt} with {task.worker_type}",
                    attempt=task.attempt,
                )
                await self.bus.publish(
                    task,
                    self.bus.subjects.worker_run(task.worker_type),
                    dedupe_key=msg_id(task.request_id, "task", task.attempt),
                )
            elif isinstance(message, Evaluate):
                ev = message.request
                await self.bus.publish(
                    ev,
                    self.bus.subjects.evaluator_run,
                    dedupe_key=msg_id(ev.request_id, "evaluate", ev.attempt),
                )
            elif isinstance(message, Finish):
                if message.event.kind == "request.completed":
                    self._observe(state)
                await finish(self.bus, message.event, user_message=state.request.message)

    def _observe(self, state: RequestState) -> None:
        ATTEMPTS.observe(len(state.attempts))
        for attempt in state.attempts:
            if attempt.verdict and attempt.result:
                EVAL_SCORE.labels(attempt.result.worker_type).observe(attempt.verdict.score)
                VERDICTS.labels(
                    attempt.result.worker_type, str(attempt.verdict.passed).lower()
                ).inc()

    async def _progress(
        self,
        state: RequestState,
        stage: str,
        detail: str,
        **fields: object,
    ) -> None:
        req = state.request
        worker = state.decision.worker_type if state.decision else None
        event = Progress.model_validate(
            {
                "request_id": req.request_id,
                "session_id": req.session_id,
                "stage": stage,
                "detail": detail,
                "worker_type": worker,
                **fields,
            }
        )
        await self.bus.emit(event, self.bus.subjects.progress(req.request_id))


async def load_state(bus: Bus, request_id: str) -> RequestState | None:
    state, _ = await get_model(bus.kv.requests, request_id, RequestState)
    return state
