"""Accepting, resuming and cancelling requests for a principal: what the WebSocket and the
workflows API share. Every lookup is scoped: a request another principal owns is "not found".

Each principal's requests are also listed in the gateway's own KV bucket `<ns>_index`, one key
per request (`<hash of principal>.<accepted at, ns>.<hash of request>`, value: the request id), so
`GET /api/workflows` never scans the status bucket and concurrent requests of one principal never
contend for one key.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from nats.js.kv import KeyValue
from opentelemetry import trace

from contracts import (
    CancelRequested,
    ClarificationAnswered,
    ClarificationRequested,
    Outcome,
    Question,
    RequestRecord,
    Turn,
)
from contracts.base import IfBusy
from services.gateway import approving
from services.gateway.deliveries import Deliveries
from services.gateway.errors import Conflict, NotFound, RateLimited, Unavailable
from services.gateway.limits import Limits
from services.gateway.spend import refuse_if_spent
from services.runtime.base.telemetry import current_trace_id
from services.runtime.bus.core import Bus, msg_id
from services.runtime.bus.kvstore import key_for
from services.runtime.requests import lanes
from services.runtime.requests.lifecycle import IllegalMove, Tracked, records
from services.runtime.requests.sessions import answered, asked_text, update_session

log = logging.getLogger("sidekick.gateway")
tracer = trace.get_tracer("sidekick.gateway")


def scoped(principal: str, uuid: str) -> str:
    """A client's uuid is only meaningful under its principal."""
    return f"{principal}/{uuid}"


def unscoped(principal: str, session_id: str) -> str:
    prefix = f"{principal}/"
    return session_id[len(prefix) :] if session_id.startswith(prefix) else session_id


@dataclass
class Request:
    """What a new request carries, from either front door."""

    session_id: str
    text: str
    success_criteria: str | None = None
    use_evaluator: bool = True
    skip_cache: bool = False
    request_id: str | None = None
    planned: bool = False
    preferences: dict[str, str] = field(default_factory=dict)
    if_busy: IfBusy = "enqueue"
    history: list[Turn] = field(default_factory=list)


@dataclass(frozen=True)
class Accepted:
    """A request taken: whether it is new (not a retried id), and where it stands."""

    fresh: bool
    behind: str | None = None  # the session's request it waits for, when queued
    position: int = 0


class Intake:
    def __init__(self, bus: Bus, limits: Limits, deliveries: Deliveries | None = None) -> None:
        self.bus = bus
        self.limits = limits
        self.deliveries = deliveries
        self._index: KeyValue | None = None

    async def start(self) -> None:
        self._index = await self.bus.bucket("index")

    async def owned(self, principal: str, request_id: str) -> RequestRecord:
        """The principal's request, or NotFound (also when another principal owns it)."""
        return (await self._owned(principal, request_id)).value

    async def _owned(self, principal: str, request_id: str) -> Tracked:
        tracked = await self.load(request_id)
        if tracked is None or tracked.value.principal != principal or tracked.value.hidden:
            raise NotFound(f"No request {request_id}.")
        return tracked

    async def load(self, request_id: str) -> Tracked | None:
        try:
            return await records(self.bus).load(request_id)
        except Exception as exc:
            raise Unavailable("The request store is unavailable; please retry.") from exc

    async def record(self, request_id: str) -> RequestRecord | None:
        tracked = await self.load(request_id)
        return tracked.value if tracked is not None else None

    async def outcome(self, request_id: str) -> Outcome | None:
        """The stored end (or open clarification) of a request, if it has one."""
        record = await self.record(request_id)
        return record.outcome if record is not None else None

    async def submit(
        self,
        principal: str,
        req: Request,
        request_id: str,
        *,
        chosen: bool = True,
        session: lanes.Session | None = None,
        taken: Callable[[Accepted], None] | None = None,
    ) -> Accepted:
        """Accept a new request: limits, its place in its session
        (services/runtime/requests/lanes.py), its record, the index, then `chat.requested` when its
        session is free. `chosen`: the client chose the id (a retry of it is answered, not run
        again); `session`: the session's record as the caller has just read it; `taken` is told
        once the request is accepted, before anything can produce its events, so that a client
        hears "accepted" ahead of the request's first frame. Raises Busy (`reject`)."""
        if chosen:
            existing = await self.record(request_id)
            if existing is not None:
                if existing.principal != principal:
                    raise Conflict(f"The request id {request_id} is already in use.")
                again = Accepted(fresh=False)
                if taken is not None:
                    taken(again)
                return again
        await refuse_if_spent(self.bus, principal, req.session_id)
        self.admit(principal, request_id)
        # The root of the request's trace: every hop after this one is its descendant.
        with tracer.start_as_current_span(
            "request received",
            kind=trace.SpanKind.SERVER,
            attributes={"sidekick.request_id": request_id, "sidekick.principal": principal},
        ):
            return await self._accept(principal, request_id, req, session, taken)

    async def _accept(
        self,
        principal: str,
        request_id: str,
        req: Request,
        session: lanes.Session | None,
        taken: Callable[[Accepted], None] | None,
    ) -> Accepted:
        seen = self.deliveries.take(req.session_id) if self.deliveries else []
        try:
            place = await lanes.claim(
                self.bus, req.session_id, request_id, req.if_busy, known=session, delivered=seen
            )
        except lanes.Busy:
            self.limits.release(request_id)
            self._give_back(req.session_id, seen)
            raise
        except Exception as exc:
            self.limits.release(request_id)
            self._give_back(req.session_id, seen)
            log.warning("could not queue a request: %r", exc)
            raise Unavailable(
                "Sidekick could not accept the message (the bus is unavailable); please retry."
            ) from exc
        record = RequestRecord(
            request_id=request_id,
            session_id=req.session_id,
            principal=principal,
            text=req.text,
            success_criteria=req.success_criteria,
            use_evaluator=req.use_evaluator,
            skip_cache=req.skip_cache,
            planned=req.planned,
            preferences=req.preferences,
            history=req.history,
            state="accepted" if place.position == 0 else "queued",
            status="started",
            trace_id=current_trace_id(),
        )
        accepted = Accepted(fresh=True, behind=place.behind, position=place.position)
        try:
            if await records(self.bus).create(record) is None:
                self.limits.release(request_id)
                raise Conflict(f"The request id {request_id} is already in use.")
            if taken is not None:  # from here on another hop may start it and answer
                taken(accepted)
            await self._remember(principal, request_id)
            if place.position == 0:
                await lanes.publish(self.bus, record)
            else:
                await self._queued(request_id, req.session_id, place)
            if place.start is not None:  # the request before was stale: its successor is due
                await lanes.start(self.bus, place.start)
        except Conflict:
            raise
        except Exception as exc:
            self.limits.release(request_id)
            log.warning("could not accept a request: %r", exc)
            raise Unavailable(
                "Sidekick could not accept the message (the bus is unavailable); please retry."
            ) from exc
        return accepted

    def _give_back(self, session_id: str, seen: list[str]) -> None:
        if self.deliveries is not None and seen:
            self.deliveries.give_back(session_id, seen)

    async def _queued(self, request_id: str, session_id: str, place: lanes.Claim) -> None:
        """A queued request: cancel what `interrupt` replaces, and start it at once if the
        request before it ended while its record was being written."""
        for other in place.cancel:
            await self._cancel(other, session_id, "interrupted by a newer message")
        now = await lanes.load(self.bus, session_id)
        if now.value.active == request_id:
            await lanes.start(self.bus, request_id)

    async def answer(
        self,
        principal: str,
        request_id: str,
        *,
        message: str = "",
        answers: dict[str, str] | None = None,
        additional_context: str | None = None,
        taken: Callable[[], None] | None = None,
        approval_id: str | None = None,
    ) -> RequestRecord:
        """Resume a parked request with the user's answers (ClarificationAnswered). Exactly one
        of several concurrent answers wins: each moves the request's record from
        awaiting_clarification by compare-and-set, and every other one gets Conflict. `taken`
        is told when this answer has won, before the request can go on."""
        tracked = await self._owned(principal, request_id)
        if tracked.value.state == "awaiting_approval" or approval_id is not None:
            words = message or next(iter((answers or {}).values()), "")
            record = await approving.decide(self.bus, principal, tracked, words, approval_id)
            # Counted as in flight again until its end arrives (a decision is never undone
            # for the per-minute limit: it was taken).
            self.limits.admit(principal, request_id)
            if taken is not None:
                taken()
            return record
        parked, asked = tracked.revision, _asked(tracked.value)
        try:
            tracked = await records(self.bus).move(
                request_id,
                "decided",
                known=tracked,
                source="awaiting_clarification",
                clarification_questions=[],
            )
        except IllegalMove as exc:
            now = exc.current.value.status if exc.current is not None else "gone"
            raise Conflict(
                f"Request {request_id} is not waiting for an answer (it is {now})."
            ) from exc
        try:  # only the answer that won counts against the limits
            self.admit(principal, request_id)
        except RateLimited:
            await self._unanswer(tracked)
            raise
        if taken is not None:
            taken()
        event = ClarificationAnswered(
            request_id=request_id,
            session_id=tracked.value.session_id,
            answers=answers or {},
            message=message,
            additional_context=additional_context,
        )
        try:
            await self.bus.publish(
                event,
                self.bus.subjects.request_answered,
                dedupe_key=self.bus.own_key(msg_id(request_id, "answered", parked)),
            )
        except Exception as exc:
            self.limits.release(request_id)
            await self._unanswer(tracked)
            raise Unavailable("Sidekick could not pass on the answer; please retry.") from exc
        said = message or "\n".join(filter(None, [*(answers or {}).values(), additional_context]))
        questions = asked_text(asked)
        record = tracked.value
        try:
            await update_session(
                self.bus,
                record.session_id,
                lambda rec: answered(rec, request_id, record.text, questions, said),
            )
        except Exception as exc:  # the answer is on its way; only the history lacks it
            log.warning("could not add the answer of %s to its session: %r", request_id, exc)
        return record

    async def cancel(self, principal: str, request_id: str) -> RequestRecord:
        """Ask every hop to stop the request. NotFound for others'; Conflict once it ended."""
        status = await self.owned(principal, request_id)
        if status.ended:
            raise Conflict(f"Request {request_id} has already ended ({status.status}).")
        await self._cancel(request_id, status.session_id, "cancelled by the user")
        return status

    async def _cancel(self, request_id: str, session_id: str, reason: str) -> None:
        event = CancelRequested(request_id=request_id, session_id=session_id, reason=reason)
        try:
            await self.bus.publish(
                event,
                self.bus.subjects.request_cancel,
                dedupe_key=self.bus.own_key(msg_id(request_id, "cancel")),
            )
        except Exception as exc:
            raise Unavailable("Sidekick could not pass on the cancel; please retry.") from exc

    async def _unanswer(self, tracked: Tracked) -> None:
        """Put a request whose answer could not be passed on back to waiting, so that the
        user's retry can answer it."""
        try:
            await records(self.bus).move(
                tracked.value.request_id,
                "awaiting_clarification",
                known=tracked,
                clarification_questions=_asked(tracked.value),
            )
        except Exception as exc:
            log.warning("could not reopen %s for answers: %r", tracked.value.request_id, exc)

    def admit(self, principal: str, request_id: str) -> None:
        refusal = self.limits.admit(principal, request_id)
        if refusal is not None:
            raise RateLimited(refusal.message, refusal.retry_after)

    async def recent(self, principal: str, limit: int) -> list[str]:
        """The principal's request ids, newest first."""
        assert self._index is not None, "Intake.start() has not run"
        # A watch filtered on the principal's prefix: the server sends only its keys.
        watcher = await self._index.watch(f"{key_for(principal)}.>", ignore_deletes=True)
        found: list[tuple[str, str]] = []
        try:
            async for entry in watcher:
                if entry is None:  # the end of what is stored
                    break
                if entry.value:
                    found.append((entry.key, entry.value.decode()))
        finally:
            await watcher.stop()  # type: ignore[no-untyped-call]
        ids = [request_id for _, request_id in sorted(found, reverse=True)[:limit]]
        return ids

    async def _remember(self, principal: str, request_id: str) -> None:
        assert self._index is not None, "Intake.start() has not run"
        key = f"{key_for(principal)}.{time.time_ns():020d}.{key_for(request_id)[:12]}"
        await self._index.put(key, request_id.encode())


def _asked(record: RequestRecord) -> list[Question]:
    """The questions of the request's open clarification."""
    outcome = record.outcome
    return list(outcome.questions) if isinstance(outcome, ClarificationRequested) else []
