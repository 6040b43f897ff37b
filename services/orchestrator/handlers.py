"""Orchestrator handlers: fold each event into the attempt loop's state and move the request's
record with it, in one compare-and-set (the loop's state lives in the record, written from the
copy this process last wrote: store.py), then publish what the loop's state says comes next
(steps.py). A request's first write is its decision: accepted -> routed -> working, the loop's
state and attempt 1's dispatch, in one write.

The decision is the request's first budget step (services/runtime/budgets/meter.py): held
before it is sent, never sent past a limit, and each of its HTTP calls (its repair too) checked
against the request's limits before it is made."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from contracts import (
    CancelRequested,
    ClarificationAnswered,
    OrchestratorDecision,
    RequestCancelled,
    RequestFailed,
    RequestRouted,
    Usage,
    VerdictIssued,
    WorkerResult,
    parse_event,
)
from contracts.approvals import Approval
from services.orchestrator import authentic, loop, prompts
from services.orchestrator.cache import SemanticCache
from services.orchestrator.loop import LoopState
from services.orchestrator.parking import ParkingLot
from services.orchestrator.projection import replay_model
from services.orchestrator.steps import Steps
from services.orchestrator.store import VIA, Store
from services.orchestrator.tracing import write_attempt_span
from services.runtime.approvals.waiting import decided_unpassed, expire, load_decided
from services.runtime.base.errors import MODEL_ERRORS, BudgetSpent
from services.runtime.base.metrics import CANCELLATIONS
from services.runtime.base.telemetry import current_ids
from services.runtime.budgets import Budget, OverBudget
from services.runtime.bus.core import Bus, redelivered
from services.runtime.bus.kvstore import Versioned
from services.runtime.llm import LLMClient
from services.runtime.llm.override import model_as
from services.runtime.requests import cancels, lanes
from services.runtime.requests.failures import failure_code
from services.runtime.requests.lifecycle import IllegalMove, Tracked, records
from services.runtime.requests.outcomes import finish

log = logging.getLogger("sidekick.orchestrator")

FRONTEND_WORKER = "TOOLS"  # the worker that offers the client's own tools to the model


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
        self.store = Store(bus)
        self.budget = Budget.of(bus)
        self.steps = Steps(bus, self.store, cache, parking, self.budget)

    # --- events in -------------------------------------------------------------------------

    async def on_routed(self, req: RequestRouted) -> None:
        # On a first delivery, the record as the gateway stored it, from the message: the
        # decision's write starts from it (and fails, and reads, if it moved since).
        tracked = None if redelivered() else lanes.record_from(req)
        if tracked is None:
            tracked = await records(self.bus).load(req.request_id)
        if tracked is None or tracked.value.ended:
            return  # unknown, or ended already (cancelled early, or a redelivery)
        self.store.moved(tracked)
        if req.session is not None and not redelivered():
            stamp = req.session
            self.store.sessions.put(req.request_id, Versioned(stamp.record, stamp.revision))
        start = self._start(req)
        state = self.store.loop_of(tracked.value) or self.store.secret_for(start)
        try:
            if state.status == "deciding":
                # An answer made with the client's tools or context is not the message's alone.
                skip = req.skip_cache or bool(req.frontend_tools or req.context)
                hit = await self.cache.lookup(
                    req.request_id, req.message, principal=req.principal, skip=skip
                )
                if hit is not None:
                    session = self.store.sessions.get(req.request_id)
                    self.store.sessions.pop(req.request_id)
                    await finish(self.bus, hit.answer(req), known=tracked, session=session, via=VIA)
                    return
                state, tracked = await self._decide(req, start, tracked)
        except IllegalMove as exc:
            log.info("request %s moved on elsewhere: %s", req.request_id, exc)
            return
        await self.steps.advance(state, tracked)

    async def on_result(self, result: WorkerResult) -> None:
        no: list[str] = []  # why it was refused, if it was
        ttl, operators = self.bus.settings.approval_timeout, self.bus.settings.operators
        state, tracked = await self._update(
            result.request_id,
            lambda s: authentic.checked(
                s,
                result,
                authentic.refuse_result,
                lambda t, r: loop.on_result(t, r, ttl, operators),
                no,
            ),
        )
        if no:
            return
        if not any(a.n == result.attempt and a.result is not None for a in state.attempts):
            await self._late(state, f"late.task{result.attempt}", result.usage)
        if state.status != "evaluating":  # the attempt ended without a verdict
            write_attempt_span(state, result.attempt)
        await self.steps.advance(state, tracked)

    async def on_verdict(self, event: VerdictIssued) -> None:
        no: list[str] = []
        state, tracked = await self._update(
            event.request_id,
            lambda s: authentic.checked(s, event, authentic.refuse_verdict, loop.on_verdict, no),
        )
        if no:
            return
        judged = (a.verdict is not None or a.verdict_error is not None for a in state.attempts)
        if not any(a.n == event.attempt and j for a, j in zip(state.attempts, judged, strict=True)):
            await self._late(state, f"late.evaluate{event.attempt}", event.usage)
        write_attempt_span(state, event.attempt)
        if event.verdict is not None:
            await self.steps.progress(
                state,
                "evaluated",
                event.verdict.feedback,
                attempt=event.attempt,
                passed=event.verdict.passed,
                score=event.verdict.score,
                feedback=event.verdict.feedback,
                suggestions=list(event.verdict.suggestions),
            )
        await self.steps.advance(state, tracked)

    async def on_answered(self, event: ClarificationAnswered) -> None:
        if event.approval_id is not None:
            decided = await load_decided(self.bus, event)
            if decided is not None:
                await self._resume(event.request_id, decided)
            return
        state, tracked = await self._update(event.request_id, lambda s: loop.answered(s, event))
        await self.parking.release(event.request_id)
        await self.steps.advance(state, tracked)

    async def on_cancel(self, event: CancelRequested) -> None:
        CANCELLATIONS.labels("orchestrator").inc()
        await cancels.flag(self.bus, event.request_id, event.reason)
        await self.parking.release(event.request_id)
        state = await self.store.load(event.request_id)
        if state is None:
            # Not orchestrated (yet): end it here; whoever else finishes later loses the race.
            tracked = self.store.record(event.request_id)
            if tracked is None:
                return
            cancelled = RequestCancelled(
                request_id=event.request_id,
                session_id=tracked.value.session_id,
                reason=event.reason,
            )
            await finish(self.bus, cancelled, known=tracked)
            return
        state, tracked = await self._update(
            event.request_id, lambda s: loop.cancelled(s, event.reason)
        )
        await self.steps.advance(state, tracked)

    async def on_parked_waiting(self, request_id: str, approval_id: str) -> None:
        """A request parked on an approval: resume it if the decision was recorded but never
        passed on (checked on each sweep)."""
        decided = await decided_unpassed(self.bus, approval_id, self.parking.interval)
        if decided is not None:
            await self._resume(request_id, decided)

    async def _resume(self, request_id: str, decided: Approval) -> None:
        state, tracked = await self._update(request_id, lambda s: loop.approval_decided(s, decided))
        await self.parking.release(request_id)
        await self.steps.advance(state, tracked)

    async def on_parked_timeout(self, request_id: str) -> None:
        waiting = await self.store.load(request_id)
        if waiting is not None and waiting.approval is not None:
            expired = await expire(self.bus, waiting.approval)
            if expired.state == "expired":  # else a person's decision won and resumes it
                await self._resume(request_id, expired)
            return
        timeout = self.bus.settings.clarification_timeout
        error = (
            f"No answer to the clarification questions arrived within {timeout:g} seconds; "
            "the request has ended. Send the request again with the details."
        )
        if waiting is not None and waiting.waiting_tools:
            names = ", ".join(dict.fromkeys(c.name for c in waiting.waiting_tools))
            error = (
                f"No result of the app's tool call ({names}) arrived within {timeout:g} "
                "seconds; the request has ended."
            )
        state, tracked = await self._update(
            request_id,
            lambda s: (
                loop.failed(s, "clarification_timeout", error)
                if s.status == "awaiting_clarification"
                else s
            ),
        )
        await self.steps.advance(state, tracked)

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

    def _start(self, req: RequestRouted) -> LoopState:
        """The loop's state of a request seen for the first time (stored with the decision)."""
        state = loop.start(req, self.bus.settings.max_attempts)
        ids = current_ids()
        if ids:
            state = state.model_copy(update={"trace_id": ids[0], "span_id": ids[1]})
        return state

    async def _decide(
        self, req: RequestRouted, start: LoopState, tracked: Tracked
    ) -> tuple[LoopState, Tracked]:
        """The decision, and the request's first write: routed, decided and attempt 1
        dispatched (or, when it ends there, nothing written: its end writes it)."""

        async def fold(change: Callable[[LoopState], LoopState]) -> tuple[LoopState, Tracked]:
            return await self.store.update(req.request_id, change, start=start, known=tracked)

        if req.replay is not None:  # the recorded request's inputs, up to the replayed step
            original = await records(self.bus).load(req.replay.of)
            was = original.value.loop if original is not None else None
            if was is not None:  # the conversation as the original saw it
                req = req.model_copy(update={"history": was.request.history})
                start = start.model_copy(update={"request": req})
        if req.replay is not None and req.replay.from_step != "decision":
            step, known = req.replay.from_step, set(self.workers)
            state, tracked = await fold(lambda s: loop.replayed(s, was, step, known))
            if state.decision is not None:
                d = state.decision
                said = f"{d.worker_type}: {d.task_description} (recorded, from {req.replay.of})"
                await self.steps.progress(state, "decided", said)
            return state, tracked
        if req.planned:  # a workflow: the research pipeline, whose planner may ask the user
            choice, usage = loop.planned_decision(req), Usage()
        else:
            # A client that brings tools of its own gets the worker that calls tools.
            kinds = [FRONTEND_WORKER] if req.frontend_tools else self.workers
            asked = prompts.decision_messages(req, kinds)
            ask = self.budget.asks.decision(req, asked)
            try:  # its step held and each of its calls (a repair too) checked: never one more
                async with self.budget.step(req, ask) as meter:
                    meter.hand_on()  # the request goes on: its end counts the decision too
                    with model_as(replay_model(start, "orchestrator")):
                        decision = await self.llm.structured(
                            asked, OrchestratorDecision, budget=meter.guard()
                        )
            except OverBudget as exc:  # the decision's call would pass a limit: never made
                note, used = exc.limit.note(), Usage()
                return await fold(lambda s: loop.stopped(s, used, note))
            except BudgetSpent as exc:  # a call of it would have: the calls made counted
                note, used = exc.note, exc.usage
                return await fold(lambda s: loop.stopped(s, used, note))
            except MODEL_ERRORS as exc:
                code, error = failure_code(exc), str(exc)
                return await fold(lambda s: loop.failed(s, code, error))
            choice, usage = decision.value, decision.usage
            if req.frontend_tools and choice.worker_type not in ("NONE", FRONTEND_WORKER):
                choice = choice.model_copy(update={"worker_type": FRONTEND_WORKER})
        known = set(self.workers)
        state, tracked = await fold(lambda s: loop.decided(s, choice, usage, known))
        if state.decision is not None:
            d = state.decision
            await self.steps.progress(state, "decided", f"{d.worker_type}: {d.task_description}")
        return state, tracked

    async def _update(
        self, request_id: str, change: Callable[[LoopState], LoopState]
    ) -> tuple[LoopState, Tracked]:
        """`store.update` for an event of a request the orchestrator has (LookupError when it
        has none: retried, then given up like any handler's failure)."""
        return await self.store.update(request_id, change)

    async def _late(self, state: LoopState, part: str, usage: Usage) -> None:
        """An answer its request no longer takes (it ended meanwhile, e.g. cancelled): what
        its calls spent is counted all the same, once (`part`: the step it answered)."""
        if usage.calls:
            async with self.budget.step(state.request, part=part) as meter:
                meter.add(usage)

    async def _give_up(self, request_id: str, exc: BaseException, session_id: str) -> None:
        error = f"Sidekick could not continue this request: {exc}"
        state = await self.store.load(request_id)
        if state is None:
            tracked = self.store.record(request_id) or await records(self.bus).load(request_id)
            failed = RequestFailed(
                request_id=request_id,
                session_id=tracked.value.session_id if tracked else session_id,
                code="delivery_exhausted",
                error=error,
            )
            await finish(self.bus, failed, known=tracked)
            return
        state, tracked = await self._update(
            request_id, lambda s: loop.failed(s, "delivery_exhausted", error)
        )
        await self.steps.advance(state, tracked)
