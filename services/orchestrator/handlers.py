"""Orchestrator handlers: fold each event into the request's state (CAS in KV), then publish
what the state says comes next."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable

from opentelemetry import context as otel_context
from opentelemetry import trace

from contracts import (
    CancelRequested,
    ClarificationAnswered,
    OrchestratorDecision,
    Progress,
    RequestCancelled,
    RequestCompleted,
    RequestFailed,
    RequestRouted,
    Source,
    VerdictIssued,
    WorkerResult,
    parse_event,
)
from services.orchestrator import loop, prompts
from services.orchestrator.cache import SemanticCache
from services.orchestrator.loop import Dispatch, Evaluate, Finish, RequestState
from services.orchestrator.parking import ParkingLot
from services.runtime import cancels
from services.runtime.bus import Bus, msg_id
from services.runtime.errors import MODEL_ERRORS
from services.runtime.failures import failure_code
from services.runtime.kvstore import get_model, mutate
from services.runtime.llm import LLMClient
from services.runtime.metrics import (
    ATTEMPTS,
    CANCELLATIONS,
    CLARIFICATIONS,
    EVAL_SCORE,
    VERDICTS,
)
from services.runtime.outcomes import finish, is_finished, load_status, update_status
from services.runtime.prompts import conversation
from services.runtime.telemetry import current_ids, new_span_id, preset_span_id, remote_parent

log = logging.getLogger("sidekick.orchestrator")
tracer = trace.get_tracer("sidekick.orchestrator")


class Orchestrator:
    def __init__(
        self,
        bus: Bus,
        llm: LLMClient,
        workers: list[str],
        cache: SemanticCache,
        parking: ParkingLot,
    ) -> None:
        self.bus = bus
        self.llm = llm
        self.workers = workers
        self.cache = cache
        self.parking = parking

    # --- events in -------------------------------------------------------------------------

    async def on_routed(self, req: RequestRouted) -> None:
        if await is_finished(self.bus, req.request_id):
            return
        status = await load_status(self.bus, req.request_id)
        if status is not None and status.status == "cancelled":
            return
        max_attempts = self.bus.settings.max_attempts
        ids = current_ids()

        def create(cur: RequestState | None) -> RequestState | None:
            if cur is not None:
                return None
            state = loop.start(req, max_attempts)
            if ids:
                state = state.model_copy(update={"trace_id": ids[0], "span_id": ids[1]})
            return state

        state = await mutate(self.bus.kv.requests, req.request_id, RequestState, create)
        assert state is not None
        if state.status == "deciding":
            await update_status(self.bus, req.request_id, status="planning", detail=req.reason)
            hit = await self.cache.lookup(req.request_id, req.message, skip=req.skip_cache)
            if hit is not None:
                await self._answer_from_cache(req, hit.output, hit.worker_type, hit.sources)
                return
            state = await self._decide(req)
        await self._advance(state)

    async def on_result(self, result: WorkerResult) -> None:
        state = await self._update(result.request_id, lambda s: loop.on_result(s, result))
        if state.status != "evaluating":  # the attempt ended without a verdict
            self._attempt_span(state, result.attempt)
        await self._advance(state)

    async def on_verdict(self, event: VerdictIssued) -> None:
        state = await self._update(event.request_id, lambda s: loop.on_verdict(s, event))
        self._attempt_span(state, event.attempt)
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

    async def on_answered(self, event: ClarificationAnswered) -> None:
        state = await self._update(event.request_id, lambda s: loop.answered(s, event))
        await self.parking.release(event.request_id)
        if state.status != "awaiting_clarification":
            await update_status(self.bus, event.request_id, clarification_questions=[])
        await self._advance(state)

    async def on_cancel(self, event: CancelRequested) -> None:
        CANCELLATIONS.labels("orchestrator").inc()
        await cancels.flag(self.bus, event.request_id, event.reason)
        await self.parking.release(event.request_id)
        state, _ = await get_model(self.bus.kv.requests, event.request_id, RequestState)
        if state is None:
            # Not orchestrated (yet): end it here; whoever else finishes later loses the race.
            status = await load_status(self.bus, event.request_id)
            if status is None:
                return
            cancelled = RequestCancelled(
                request_id=event.request_id, session_id=status.session_id, reason=event.reason
            )
            await finish(self.bus, cancelled, user_message=status.text)
            return
        state = await self._update(event.request_id, lambda s: loop.cancelled(s, event.reason))
        await self._advance(state)

    async def on_parked_timeout(self, request_id: str) -> None:
        timeout = self.bus.settings.clarification_timeout
        error = (
            f"No answer to the clarification questions arrived within {timeout:g} seconds; "
            "the request has ended. Send the request again with the details."
        )
        state = await self._update(
            request_id,
            lambda s: (
                loop.failed(s, "clarification_timeout", error)
                if s.status == "awaiting_clarification"
                else s
            ),
        )
        await self._advance(state)

    async def on_dead_letter_advisory(self, data: bytes) -> None:
        """A message ran out of deliveries without its handler finishing (e.g. the process was
        killed on the last one): dead-letter it and end its request with the reason."""
        advisory = json.loads(data)
        stream, seq = advisory.get("stream"), advisory.get("stream_seq")
        if not stream or not seq:
            return
        raw = await self.bus.js.get_msg(stream, seq)
        reason = f"max deliveries ({advisory.get('deliveries')}) on {advisory.get('consumer')}"
        await self.bus.dead_letter("orchestrator", reason, raw.data or b"", dict(raw.headers or {}))
        try:
            event = parse_event(raw.data or b"")
        except ValueError:
            return
        await self._give_up(event.request_id, RuntimeError(reason), event.session_id)

    async def exhausted(self, event: object, exc: BaseException) -> None:
        request_id = getattr(event, "request_id", None)
        if request_id:
            await self._give_up(request_id, exc, getattr(event, "session_id", ""))

    # --- steps -----------------------------------------------------------------------------

    async def _decide(self, req: RequestRouted) -> RequestState:
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
            return await self._update(req.request_id, lambda s: loop.failed(s, code, error))
        known = set(self.workers)
        state = await self._update(
            req.request_id, lambda s: loop.decided(s, decision.value, decision.usage, known)
        )
        if state.decision is not None:
            d = state.decision
            await self._progress(state, "decided", f"{d.worker_type}: {d.task_description}")
        return state

    async def _answer_from_cache(
        self, req: RequestRouted, output: str, worker_type: str, sources: list[Source]
    ) -> None:
        done = RequestCompleted.model_validate(
            {
                "request_id": req.request_id,
                "session_id": req.session_id,
                "status": "completed",
                "output": output,
                "route": "cached",
                "worker_type": worker_type,
                "sources": sources,
            }
        )
        await self._update(req.request_id, lambda s: s.model_copy(update={"status": "completed"}))
        await finish(self.bus, done, user_message=req.message)

    async def _give_up(self, request_id: str, exc: BaseException, session_id: str) -> None:
        error = f"Sidekick could not continue this request: {exc}"
        state, _ = await get_model(self.bus.kv.requests, request_id, RequestState)
        if state is None:
            status = await load_status(self.bus, request_id)
            failed = RequestFailed(
                request_id=request_id,
                session_id=status.session_id if status else session_id,
                code="delivery_exhausted",
                error=error,
            )
            await finish(self.bus, failed, user_message=status.text if status else "")
            return
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
                await self._dispatch(state, message)
            elif isinstance(message, Evaluate):
                ev = message.request
                await update_status(
                    self.bus,
                    ev.request_id,
                    status="validating",
                    detail=f"judging attempt {ev.attempt}",
                )
                with self._in_attempt(state, ev.attempt):
                    await self.bus.publish(
                        ev,
                        self.bus.subjects.evaluator_run,
                        dedupe_key=msg_id(ev.request_id, "evaluate", ev.attempt),
                    )
            elif isinstance(message, Finish):
                await self._finish(state, message)

    async def _dispatch(self, state: RequestState, message: Dispatch) -> None:
        task = message.task
        cur = state.current
        if cur is not None and cur.span_id is None and state.trace_id:
            span_id = format(new_span_id(), "016x")
            started = time.time_ns()
            state = await self._update(
                task.request_id, lambda s: loop.attempt_started(s, task.attempt, span_id, started)
            )
        await update_status(
            self.bus,
            task.request_id,
            status="researching",
            worker_type=task.worker_type,
            attempt=task.attempt,
            detail=f"attempt {task.attempt} with {task.worker_type}",
        )
        await self._progress(
            state,
            "attempt_started",
            f"attempt {task.attempt} with {task.worker_type}",
            attempt=task.attempt,
        )
        with self._in_attempt(state, task.attempt):
            await self.bus.publish(
                task,
                self.bus.subjects.worker_run(task.worker_type),
                dedupe_key=msg_id(task.request_id, "task", task.attempt),
            )

    async def _finish(self, state: RequestState, message: Finish) -> None:
        event = message.event
        if event.kind == "request.clarification":
            CLARIFICATIONS.labels(event.source).inc()
            await self.parking.park(event.request_id, self.bus.settings.clarification_timeout)
        elif event.kind == "request.completed":
            self._observe(state)
        elif event.kind == "request.cancelled":
            await self.parking.release(event.request_id)
        if (
            isinstance(event, RequestCompleted)
            and event.status == "completed"
            and not state.clarifications
            and event.worker_type is not None
            and not await is_finished(self.bus, event.request_id)
        ):
            # Stored before the answer is published, so a repeat sent on seeing the answer
            # finds it.
            await self.cache.store(
                event.request_id,
                state.request.message,
                event.output,
                event.worker_type,
                list(event.sources),
            )
        await finish(self.bus, event, user_message=state.request.message)

    def _in_attempt(self, state: RequestState, n: int) -> _AttemptContext:
        attempt = next((a for a in state.attempts if a.n == n), None)
        if attempt is None or attempt.span_id is None or state.trace_id is None:
            return _AttemptContext(None)
        return _AttemptContext(remote_parent(state.trace_id, attempt.span_id))

    def _attempt_span(self, state: RequestState, n: int) -> None:
        """Write the span of attempt n, now that its outcome is known. Its id was chosen at
        dispatch, so the worker's and evaluator's spans are already its children."""
        attempt = next((a for a in state.attempts if a.n == n), None)
        if attempt is None or attempt.span_id is None or not state.trace_id or not state.span_id:
            return
        attrs: dict[str, str | int | bool] = {"sidekick.attempt": n}
        if state.decision:
            attrs["sidekick.worker_type"] = state.decision.worker_type
        if attempt.verdict is not None:
            attrs["sidekick.verdict.passed"] = attempt.verdict.passed
            attrs["sidekick.verdict.score"] = attempt.verdict.score
        if attempt.result is not None:
            attrs["sidekick.worker.success"] = attempt.result.success
        with preset_span_id(int(attempt.span_id, 16)):
            span = tracer.start_span(
                f"attempt {n}",
                context=remote_parent(state.trace_id, state.span_id),
                start_time=attempt.started_ns,
                attributes=attrs,
            )
        span.end()

    def _observe(self, state: RequestState) -> None:
        ATTEMPTS.observe(len(state.attempts))
        for attempt in state.attempts:
            if attempt.verdict and attempt.result:
                kind = attempt.result.worker_type
                EVAL_SCORE.labels(kind).observe(attempt.verdict.score)
                VERDICTS.labels(kind, str(attempt.verdict.passed).lower()).inc()

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


class _AttemptContext:
    """Make the attempt's span the parent of what is published inside the block."""

    def __init__(self, ctx: otel_context.Context | None) -> None:
        self.ctx = ctx
        self.token: object | None = None

    def __enter__(self) -> None:
        if self.ctx is not None:
            self.token = otel_context.attach(self.ctx)

    def __exit__(self, *exc: object) -> None:
        if self.token is not None:
            otel_context.detach(self.token)  # type: ignore[arg-type]
