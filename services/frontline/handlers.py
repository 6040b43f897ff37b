"""Frontline's handler: decide, then stream a direct answer or route."""

from __future__ import annotations

import contextlib
import logging

from contracts import (
    ChatRequested,
    FrontlineDecision,
    Progress,
    RequestCancelled,
    RequestCompleted,
    RequestFailed,
    RequestRouted,
    StreamChunk,
    Turn,
    Usage,
)
from contracts.events import ProgressStage
from services.frontline import prompts
from services.runtime.bus import Bus, msg_id
from services.runtime.cancels import Cancellations
from services.runtime.errors import MODEL_ERRORS
from services.runtime.failures import failure_code
from services.runtime.lifecycle import IllegalMove, Tracked
from services.runtime.llm import LLMClient, StreamResult
from services.runtime.metrics import CANCELLATIONS
from services.runtime.outcomes import finish
from services.runtime.prompts import conversation
from services.runtime.sessions import load_history

log = logging.getLogger("sidekick.frontline")

PLANNED = "a workflow: the research pipeline plans it"


class Frontline:
    def __init__(self, bus: Bus, llm: LLMClient, cancels: Cancellations) -> None:
        self.bus = bus
        self.llm = llm
        self.cancels = cancels

    async def handle(self, req: ChatRequested) -> None:
        tracked = await self.bus.requests.load(req.request_id)
        if tracked is None or tracked.value.state not in ("accepted", "direct"):
            return  # unknown, ended (a redelivery, an early cancel) or routed already
        if self.cancels.is_set(req.request_id):
            await self._cancelled(req)
            return
        turns = self.bus.settings.history_turns
        if req.history:  # the client sent the conversation itself
            history = req.history[-2 * turns :] if turns > 0 else []
        else:
            history = await load_history(self.bus, req.session_id, turns)
        if req.planned:  # a workflow is planned by the research pipeline, never answered here
            await self._route(req, PLANNED, history)
            return
        try:
            decision = await self.llm.structured(
                conversation(prompts.SYSTEM, history, req.message), FrontlineDecision
            )
        except MODEL_ERRORS as exc:
            await self._fail(req, exc)
            return
        if self.cancels.is_set(req.request_id):
            await self._cancelled(req)
            return
        if decision.value.route_to_orchestrator:
            await self._route(req, decision.value.reason, history)
            return
        try:
            tracked = await self.bus.requests.move(req.request_id, "direct", known=tracked)
        except IllegalMove:
            return  # cancelled meanwhile: whoever cancelled it ends it
        await self._progress(req, "direct", decision.value.reason)
        await self._answer(req, history, decision.usage, tracked)

    async def _route(self, req: ChatRequested, reason: str, history: list[Turn]) -> None:
        await self._progress(req, "routed", reason)
        routed = RequestRouted(
            **req.model_dump(exclude={"kind", "event_id", "ts", "history"}),
            reason=reason,
            history=history,
        )
        await self.bus.publish(
            routed, self.bus.subjects.request_routed, dedupe_key=msg_id(req.request_id, "routed")
        )

    async def _answer(
        self, req: ChatRequested, history: list[Turn], usage: Usage, tracked: Tracked
    ) -> None:
        result = StreamResult()
        subject = self.bus.subjects.stream(req.request_id)
        messages = conversation(prompts.ANSWER, history, req.message)
        try:
            seq = 0
            async with contextlib.aclosing(self.llm.stream(messages, result)) as deltas:
                async for delta in deltas:
                    if self.cancels.is_set(req.request_id):
                        # Leaving the loop closes the stream: the model call is aborted.
                        CANCELLATIONS.labels("frontline").inc()
                        await self._cancelled(req)
                        return
                    chunk = StreamChunk(
                        request_id=req.request_id, session_id=req.session_id, seq=seq, text=delta
                    )
                    await self.bus.emit(chunk, subject)
                    seq += 1
        except MODEL_ERRORS as exc:
            await self._fail(req, exc)
            return
        done = RequestCompleted(
            request_id=req.request_id,
            session_id=req.session_id,
            status="completed",
            output=result.text,
            route="direct",
            usage=usage + result.usage,
        )
        await finish(self.bus, done, known=tracked)

    async def _cancelled(self, req: ChatRequested) -> None:
        reason = self.cancels.seen.get(req.request_id, "cancelled by the user")
        event = RequestCancelled(
            request_id=req.request_id, session_id=req.session_id, reason=reason
        )
        await finish(self.bus, event)

    async def _progress(self, req: ChatRequested, stage: ProgressStage, detail: str) -> None:
        event = Progress(
            request_id=req.request_id, session_id=req.session_id, stage=stage, detail=detail
        )
        await self.bus.emit(event, self.bus.subjects.progress(req.request_id))

    async def _fail(self, req: ChatRequested, exc: BaseException) -> None:
        log.warning("request %s failed: %s", req.request_id, exc)
        failed = RequestFailed(
            request_id=req.request_id,
            session_id=req.session_id,
            code=failure_code(exc),
            error=str(exc),
        )
        await finish(self.bus, failed)

    async def exhausted(self, req: ChatRequested, exc: BaseException) -> None:
        failed = RequestFailed(
            request_id=req.request_id,
            session_id=req.session_id,
            code="delivery_exhausted",
            error=f"The frontline could not process this request: {exc}",
        )
        await finish(self.bus, failed)
