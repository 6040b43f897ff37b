"""Frontline's handler: one model call that streams a direct answer, or routes.

The call is one budget step (services/runtime/budgets/meter.py): held before it is made (its
maximum, against the principal's day and the session), and never made when it does not fit:
the request then ends `failed` with `budget_exhausted`, naming the limit, as the orchestrator
ends one with no answer. The step's spend is counted as it ends, before anyone sees the
request's end, or, routed, before the orchestrator has it (which counts its own steps when the
request ends). The frontline's call is counted apart from the orchestrator's steps (`PART`), so
the two never stand for each other; a redelivery finds its hold (granted again, nothing
written) or its count (counted nothing)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Literal

from contracts import (
    ChatRequested,
    Progress,
    RequestCancelled,
    RequestCompleted,
    RequestFailed,
    RequestRouted,
    SessionRecord,
    Turn,
    Usage,
)
from contracts.base import ProgressStage
from services.frontline import prompts
from services.runtime.base.errors import MODEL_ERRORS
from services.runtime.base.metrics import CANCELLATIONS
from services.runtime.budgets import Budget, Limit, OverBudget
from services.runtime.bus.core import Bus, msg_id, redelivered
from services.runtime.bus.kvstore import Versioned
from services.runtime.bus.progress import emit_progress
from services.runtime.llm import LLMClient, Messages
from services.runtime.llm.choice import ChoiceResult, Convention
from services.runtime.llm.prompts import context_block, conversation
from services.runtime.requests import lanes
from services.runtime.requests.cancels import Cancellations
from services.runtime.requests.failures import failure_code
from services.runtime.requests.lifecycle import Tracked, records
from services.runtime.requests.outcomes import finish
from services.runtime.requests.sessions import load_versioned, recent
from services.runtime.requests.streaming import ChunkStream

log = logging.getLogger("sidekick.frontline")

PLANNED = "a workflow: the research pipeline plans it"
FRONTEND = "the client brought tools of its own, which the TOOLS worker offers to the model"
PART = "frontline"  # the frontline's call is held and counted apart from the orchestrator's
Ended = Literal["answered", "cancelled"]


class Frontline:
    def __init__(self, bus: Bus, llm: LLMClient, cancels: Cancellations) -> None:
        self.bus = bus
        self.llm = llm
        self.cancels = cancels
        self.budget = Budget.of(bus)

    async def handle(self, req: ChatRequested) -> None:
        # The record as the gateway stored it, from the message, on a first delivery: its end
        # is written from it without a read (and fails, and reads, if a cancel moved it since).
        tracked = None if redelivered() else lanes.record_from(req)
        if tracked is None:
            tracked = await records(self.bus).load(req.request_id)
            if tracked is None or tracked.value.state not in ("accepted", "direct"):
                return  # unknown, ended (a redelivery, an early cancel) or routed already
        if self.cancels.is_set(req.request_id):
            await self._cancelled(req, tracked)
            return
        turns = self.bus.settings.history_turns
        session: Versioned[SessionRecord] | None = None
        if req.session is not None:  # as the gateway wrote it: the end's write starts there
            session = Versioned(req.session.record, req.session.revision)
        if req.history:  # the client sent the conversation itself
            history = req.history[-2 * turns :] if turns > 0 else []
        elif session is not None:
            history = recent(session.value, turns)
        elif req.session_turns is not None:  # the session's, as the gateway sent it on
            history = req.session_turns[-2 * turns :] if turns > 0 else []
        else:
            session = await load_versioned(self.bus, req.session_id)
            history = recent(session.value, turns)
        if req.planned:  # a workflow is planned by the research pipeline, never answered here
            await self._route(req, history, PLANNED, push=tracked.value.push)
            return
        if req.replay is not None:  # a replay: the recorded route stands, no model asked
            reason = f"replay of {req.replay.of}: {req.replay.reason}"
            await self._route(req, history, reason, push=tracked.value.push)
            return
        if req.frontend_tools:  # only the TOOLS worker's model can call the client's tools
            await self._route(req, history, FRONTEND, push=tracked.value.push)
            return
        reply = ChoiceResult()
        answer = _Answer(self, req, push=tracked.value.push)

        said = req.message + context_block(req.context)  # the app's context: data, delimited

        def build(how: Convention) -> Messages:
            return conversation(prompts.system(how), history, said)

        ask = self.budget.asks.answer_or_route(build, prompts.ROUTE)
        try:  # held first: never made past a limit; counted as the step ends, before the end
            async with self.budget.step(req, ask, part=PART) as meter:
                meter.follow(reply)
                ended = await self._call(req, build, reply, answer)
        except OverBudget as exc:
            await self._over_budget(req, exc.limit, tracked)
            return
        if ended == "cancelled":
            CANCELLATIONS.labels("frontline").inc()
            await answer.settle()
            await self._cancelled(req, tracked)
            return
        if isinstance(ended, Exception):  # the model failed
            await answer.settle()
            await self._fail(req, ended, tracked)
            return
        if reply.called is not None:
            await answer.settle()
            await self._route(req, history, reply.called, reply.usage, push=tracked.value.push)
            return
        await answer.stop()
        done = RequestCompleted(
            request_id=req.request_id,
            session_id=req.session_id,
            status="completed",
            output=reply.text,
            route="direct",
            usage=reply.usage,
            cost_usd=self.budget.cost(reply.usage),
            usage_estimated=reply.usage.counted_calls > 0,
        )
        # accepted -> direct -> completed in one write (a cancel that came first stands).
        await finish(self.bus, done, known=tracked, session=session, via=("direct",))

    async def _call(
        self,
        req: ChatRequested,
        build: Callable[[Convention], Messages],
        reply: ChoiceResult,
        answer: _Answer,
    ) -> Ended | Exception:
        """One model call: it streams the answer (tokens go to the client as they come) or
        calls `route` instead; the first tokens tell which. How it ended, or the model's error."""
        try:
            async with contextlib.aclosing(
                self.llm.answer_or_call(build, prompts.ROUTE, reply)
            ) as deltas:
                async for delta in deltas:
                    if self.cancels.is_set(req.request_id):
                        return "cancelled"  # leaving the loop closes the stream: call aborted
                    await answer.text(delta)
        except MODEL_ERRORS as exc:
            return exc
        return "answered"

    async def _route(
        self,
        req: ChatRequested,
        history: list[Turn],
        reason: str,
        usage: Usage | None = None,
        *,
        push: bool,
    ) -> None:
        await self._progress(req, "routed", reason, push=push)
        routed = RequestRouted(
            **req.model_dump(exclude={"kind", "event_id", "ts", "history", "session_turns"}),
            reason=reason,
            history=history,
            usage=usage or Usage(),
        )
        await self.bus.publish(
            routed,
            self.bus.subjects.request_routed,
            dedupe_key=self.bus.own_key(msg_id(req.request_id, "routed")),
        )

    async def _cancelled(self, req: ChatRequested, tracked: Tracked | None = None) -> None:
        reason = self.cancels.seen.get(req.request_id, "cancelled by the user")
        event = RequestCancelled(
            request_id=req.request_id, session_id=req.session_id, reason=reason
        )
        await finish(self.bus, event, known=tracked)

    async def _progress(
        self, req: ChatRequested, stage: ProgressStage, detail: str, *, push: bool
    ) -> None:
        """`push`: a client is notified of the request (its record as this handler holds it)."""
        event = Progress(
            request_id=req.request_id, session_id=req.session_id, stage=stage, detail=detail
        )
        await emit_progress(self.bus, event, push=push)

    async def _fail(
        self, req: ChatRequested, exc: BaseException, tracked: Tracked | None = None
    ) -> None:
        log.warning("request %s failed: %s", req.request_id, exc)
        failed = RequestFailed(
            request_id=req.request_id,
            session_id=req.session_id,
            code=failure_code(exc),
            error=str(exc),
        )
        await finish(self.bus, failed, known=tracked)

    async def _over_budget(
        self, req: ChatRequested, limit: Limit, tracked: Tracked | None = None
    ) -> None:
        failed = RequestFailed(
            request_id=req.request_id,
            session_id=req.session_id,
            code="budget_exhausted",
            error=limit.note().removeprefix("Note: "),
        )
        await finish(self.bus, failed, known=tracked)

    async def exhausted(self, req: ChatRequested, exc: BaseException) -> None:
        await self.budget.close(req, part=PART)  # its hold, if it took one, is dropped
        failed = RequestFailed(
            request_id=req.request_id,
            session_id=req.session_id,
            code="delivery_exhausted",
            error=f"The frontline could not process this request: {exc}",
        )
        await finish(self.bus, failed)


class _Answer:
    """A direct answer as it streams: the first text says so in a progress event, and the text
    goes out as stream chunks, a chunk per burst of tokens. The request's record is not
    written while it streams: its end moves it from `accepted` through `direct` in one write
    (services/runtime/requests/lifecycle.py, `reachable`); a cancel meanwhile moves it from
    `accepted`, and stands."""

    def __init__(self, frontline: Frontline, req: ChatRequested, *, push: bool) -> None:
        self.frontline = frontline
        self.req = req
        self.push = push
        self.chunks = ChunkStream(frontline.bus, req.request_id, req.session_id)
        self.began = False

    async def text(self, delta: str) -> None:
        if not self.began:
            self.began = True
            await self.frontline._progress(self.req, "direct", "", push=self.push)
        self.chunks.add(delta)

    async def stop(self) -> None:
        """The answer ended: every chunk sent. Its end, published next, carries the whole text,
        so the stream keeps no tail of its own."""
        await self.chunks.close(end_has_text=True)

    async def settle(self) -> None:
        """The answer stopped for another reason (a route after some text, a cancel, a
        failure): send what was said, and keep it."""
        await self.chunks.close()
