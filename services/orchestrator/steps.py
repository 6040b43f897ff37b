"""What the orchestrator publishes next, from the loop's state alone (projection.py): an
attempt's task, an evaluation, or the request's end (or its question). The request's record
moved with the loop's state in one write before (store.py), or, for an end, is moved by it
(the loop's last state and the outcome in the one write `finish` makes); when the lifecycle
refuses the move (the request was cancelled or ended elsewhere meanwhile) nothing is
published.

Each model step it sends (each attempt's worker, each evaluation) is a budget step
(services/runtime/budgets/meter.py): its maximum is held against the request's limits, its
principal's day and its session before it is sent, and a step that does not fit is not sent:
the request ends naming the limit. The worker or the evaluator is told what it may spend
(`budget`) and spends under the step's hold; the request's spend is counted once, before its end
is published, and when it parks (a clarification, an approval) its hold is settled down to what
it used."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from contracts import ClarificationRequested, Progress, RequestCompleted
from services.orchestrator import authentic, loop
from services.orchestrator.cache import SemanticCache
from services.orchestrator.loop import Dispatch, Evaluate, Finish, LoopState, Message
from services.orchestrator.parking import ParkingLot
from services.orchestrator.projection import shown_usage
from services.orchestrator.state import SIDE_EFFECT_WORKERS
from services.orchestrator.store import VIA, Store
from services.orchestrator.tracing import in_attempt, observe
from services.runtime.approvals.waiting import open_approval
from services.runtime.base.metrics import CLARIFICATIONS
from services.runtime.budgets import Ask, Budget, Meter, OverBudget
from services.runtime.bus.core import Bus
from services.runtime.bus.progress import emit_progress
from services.runtime.requests.lifecycle import IllegalMove, Tracked
from services.runtime.requests.outcomes import finish

log = logging.getLogger("sidekick.orchestrator")


@dataclass(eq=False)
class Steps:
    bus: Bus
    store: Store
    cache: SemanticCache
    parking: ParkingLot
    budget: Budget

    async def advance(self, state: LoopState, tracked: Tracked) -> None:
        """Publish what the loop's state says comes next (`tracked`: the request's record as
        written with it, or as read), unless a budget has run out: then the request ends,
        saying which."""
        try:
            try:
                await self._step(state, tracked)
            except OverBudget as exc:
                note = exc.limit.note()
                state, tracked = await self.store.update(
                    state.request.request_id, lambda s: loop.out_of_budget(s, note)
                )
                await self._step(state, tracked)  # it has ended: nothing more is held
        except IllegalMove as exc:
            log.info("request %s moved on elsewhere: %s", state.request.request_id, exc)

    async def _step(self, state: LoopState, tracked: Tracked) -> None:
        """One budget step: the next model step held (OverBudget when it does not fit), what
        comes next published, and the step settled as that says (handed on, counted, parked)."""
        messages = loop.next_messages(state)
        ask = self._ask(state, messages)
        async with self.budget.step(state.request, ask, used=state.usage) as meter:
            if not messages:
                meter.hand_on()  # nothing to send now: the request goes on as it was
            for message in messages:
                if isinstance(message, Dispatch):
                    await self._dispatch(state, message, tracked, meter)
                elif isinstance(message, Evaluate):
                    await self._evaluate(state, message, tracked, meter)
                elif isinstance(message, Finish):
                    await self._finish(state, message, tracked, meter)

    def _ask(self, state: LoopState, messages: list[Message]) -> Ask | None:
        """What the next model step may take at most, when one is sent now."""
        for message in messages:
            if isinstance(message, Dispatch):
                task = message.task
                judged = state.request.use_evaluator and task.worker_type not in SIDE_EFFECT_WORKERS
                return self.budget.asks.task(task, state.usage, judged)
            if isinstance(message, Evaluate):
                return self.budget.asks.evaluation(message.request, state.usage)
        return None

    async def _dispatch(
        self, state: LoopState, message: Dispatch, tracked: Tracked, meter: Meter
    ) -> None:
        meter.hand_on()  # the worker spends under the step's hold; the request's end counts it
        task = message.task.model_copy(
            update={"budget": meter.allowance(), "push": tracked.value.push}
        )
        detail = f"attempt {task.attempt} with {task.worker_type}"
        await self.progress(state, "attempt_started", detail, attempt=task.attempt)
        with in_attempt(state, task.attempt):
            await self.bus.publish(
                task,
                self.bus.subjects.worker_run(task.worker_type),
                dedupe_key=authentic.key(state, "task", task.attempt),
            )

    async def _evaluate(
        self, state: LoopState, message: Evaluate, tracked: Tracked, meter: Meter
    ) -> None:
        meter.hand_on()  # the evaluator spends under the step's hold, as a worker does
        ev = message.request.model_copy(update={"budget": meter.allowance()})
        # The attempt's work is done and judging begins (AG-UI's "evaluating attempt n" step).
        await self.progress(
            state, "attempt_finished", f"judging attempt {ev.attempt}", attempt=ev.attempt
        )
        with in_attempt(state, ev.attempt):
            await self.bus.publish(
                ev,
                self.bus.subjects.evaluator_run,
                dedupe_key=authentic.key(state, "evaluate", ev.attempt),
            )

    async def _finish(
        self, state: LoopState, message: Finish, tracked: Tracked, meter: Meter
    ) -> None:
        event = message.event
        if event.kind == "request.clarification" and event.approval is not None:
            await open_approval(self.bus, event.approval)
            await self.parking.park(
                event.request_id, self.bus.settings.approval_timeout, event.approval.approval_id
            )
        elif event.kind == "request.clarification":
            CLARIFICATIONS.labels(event.source).inc()
            await self.parking.park(event.request_id, self.bus.settings.clarification_timeout)
        elif event.kind == "request.completed":
            observe(state)
        elif event.kind == "request.cancelled":
            await self.parking.release(event.request_id)
        if (
            isinstance(event, RequestCompleted)
            and event.status == "completed"
            and not state.clarifications
            and not (state.request.frontend_tools or state.request.context)
            and event.worker_type is not None
            and not tracked.value.ended
            and state.request.replay is None  # a replay's answer is an experiment, not reused
        ):
            # Stored before the answer is published, so a repeat sent on seeing the answer
            # finds it.
            await self.cache.store(
                event.request_id,
                state.request.message,
                event.output,
                event.worker_type,
                list(event.sources),
                principal=state.request.principal,
            )
        # Counted before anyone sees the end; a parked request's hold settled to its spend.
        if isinstance(event, ClarificationRequested):
            settings = self.bus.settings
            await meter.park(
                settings.approval_timeout if event.approval else settings.clarification_timeout
            )
        else:
            await meter.count()
            if isinstance(event, RequestCompleted):
                event = event.model_copy(update={"cost_usd": self.budget.cost(shown_usage(state))})
        # The end and the loop's last state, in one write.
        session = self.store.sessions.get(event.request_id)
        self.store.sessions.pop(event.request_id)  # written now: a later write reads it
        await finish(
            self.bus, event, known=tracked, session=session, via=VIA, changes={"loop": state}
        )
        self.store.records.pop(event.request_id)

    async def progress(
        self,
        state: LoopState,
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
        # On the push subject too when a client is notified of it: the record as this process
        # last moved it (each progress follows a write of it, which reads it again on a lost
        # compare-and-set, so a `push` set by a gateway is seen from the next step on).
        tracked = self.store.record(req.request_id)
        await emit_progress(self.bus, event, push=tracked is not None and tracked.value.push)
