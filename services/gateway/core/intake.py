"""The one way into Sidekick for every surface: `Intake.say` takes what a person says into a
session and does what each surface needs the same way: the message limit, the session's lane,
the day's and the session's budget, the per-principal limits, then "answer the request parked
on the user, else submit a new one"; it returns one typed result (said.py) that each surface
renders in its own shape. Besides: resuming by approval id (`decide`, the approvals queue),
cancelling, and the principal's own requests. Every lookup is scoped: a request another
principal owns is "not found".

Each principal's requests are also listed in the gateway's own KV bucket `<ns>_index`
(index.py).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable

from opentelemetry import trace

from contracts import CancelRequested, Outcome, RequestRecord
from services.gateway.core import answers, approving
from services.gateway.core.copies import SessionCopies
from services.gateway.core.deliveries import Deliveries
from services.gateway.core.errors import (
    Busy,
    Conflict,
    GatewayError,
    NotFound,
    Unavailable,
)
from services.gateway.core.index import Index
from services.gateway.core.limits import Limits
from services.gateway.core.said import (
    Accepted,
    Answered,
    Refused,
    Reply,
    Said,
    Submission,
    Surface,
    Taken,
    TooLong,
    Waiting,
    Words,
)
from services.gateway.core.spend import refuse_if_spent
from services.runtime.base.telemetry import current_trace_id
from services.runtime.bus.core import Bus, msg_id
from services.runtime.requests import lanes
from services.runtime.requests.lifecycle import PARKED, Tracked, records

log = logging.getLogger("sidekick.gateway")
tracer = trace.get_tracer("sidekick.gateway")

# Told where the words go (the request id, and whether they answer it) once that is known and
# before anything is sent: a caller that follows the request's events starts here.
Before = Callable[[str, bool], Awaitable[None]]


def scoped(principal: str, uuid: str) -> str:
    """A client's uuid is only meaningful under its principal."""
    return f"{principal}/{uuid}"


def unscoped(principal: str, session_id: str) -> str:
    prefix = f"{principal}/"
    return session_id[len(prefix) :] if session_id.startswith(prefix) else session_id


class Intake:
    def __init__(
        self,
        bus: Bus,
        limits: Limits,
        deliveries: Deliveries | None = None,
        copies: SessionCopies | None = None,
    ) -> None:
        self.bus = bus
        self.limits = limits
        self.deliveries = deliveries
        self.copies = copies or SessionCopies()
        self.index = Index(bus)

    async def start(self) -> None:
        await self.index.start()

    async def say(
        self,
        principal: str,
        session_id: str,
        words: Words,
        *,
        to: Submission | Reply,
        surface: Surface,
        before: Before | None = None,
        taken: Callable[[Taken], None] | None = None,
    ) -> Said:
        """What `principal` says into `session_id`: an answer to the request `to` names
        (Reply), or a new request (Submission), which answers instead the request parked on
        the user in the session, if there is one (or refuses, or ignores it: `on_parked`).
        `before` is told where the words go before they are sent; `taken` once they are taken,
        before the request can go on, so that a client hears "accepted" ahead of the request's
        first event. `surface` names the caller in the request's trace. GatewayErrors come back
        as Refused (an exception of `before` other than a GatewayError goes up)."""
        limit = self.bus.settings.max_message_chars
        if len(words.text) > limit:
            return TooLong(limit, len(words.text))
        if isinstance(to, Reply):
            return await self._reply(principal, to.request_id, words, before, taken)
        try:
            session = await self.session(session_id)
        except Exception:
            return Refused(Unavailable("The session store is unavailable."))
        if to.on_parked != "new":
            try:
                parked = await self._parked(principal, session.value.parked)
            except GatewayError as exc:
                return Refused(exc, answering=True)
            if parked is not None and to.on_parked == "refuse":
                return Waiting(parked.request_id)
            if parked is not None:
                return await self._reply(principal, parked.request_id, words, before, taken)
        try:
            if before is not None:
                await before(to.request_id, False)
            return await self._submit(
                principal, session_id, words.text, to, session, surface, taken
            )
        except lanes.Busy as busy:
            said = f"This conversation is still answering request {busy.active}."
            return Refused(Busy(said, busy.active), to.request_id)
        except GatewayError as exc:
            return Refused(exc, to.request_id)

    async def _reply(
        self,
        principal: str,
        request_id: str,
        words: Words,
        before: Before | None,
        taken: Callable[[Taken], None] | None,
    ) -> Said:
        try:
            if before is not None:
                await before(request_id, True)
            return await self._answer(principal, request_id, words, taken)
        except GatewayError as exc:
            return Refused(exc, request_id, answering=True)

    async def session(self, session_id: str) -> lanes.Session:
        """The session's record: this gateway's copy when it holds the session (the write it
        starts fails, and reads, if the copy is behind), else as read now (and kept)."""
        copy = self.copies.get(session_id)
        if copy is not None:
            return copy
        session = await lanes.load(self.bus, session_id)
        self.copies.wrote(session_id, session)
        return session

    async def parked(self, principal: str, session_id: str) -> RequestRecord | None:
        """The principal's request parked on the user in the session, if there is one."""
        try:
            session = await lanes.load(self.bus, session_id)
        except Exception as exc:
            raise Unavailable("The session store is unavailable.") from exc
        return await self._parked(principal, session.value.parked)

    async def _parked(self, principal: str, request_id: str | None) -> RequestRecord | None:
        if request_id is None:
            return None
        record = await self.record(request_id)
        if record is None or record.principal != principal or record.state not in PARKED:
            return None
        return record

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

    async def _submit(
        self,
        principal: str,
        session_id: str,
        text: str,
        new: Submission,
        session: lanes.Session,
        surface: Surface,
        taken: Callable[[Taken], None] | None,
    ) -> Accepted:
        """Accept a new request: limits, its place in its session
        (services/runtime/requests/lanes.py), its record, the index, then `chat.requested` when its
        session is free. Raises lanes.Busy (`reject`)."""
        request_id = new.request_id
        if new.chosen:
            existing = await self.record(request_id)
            if existing is not None:
                if existing.principal != principal:
                    raise Conflict(f"The request id {request_id} is already in use.")
                again = Accepted(request_id, fresh=False)
                if taken is not None:
                    taken(again)
                return again
        await refuse_if_spent(self.bus, principal, session_id)
        self.limits.take(principal, request_id)
        # The root of the request's trace: every hop after this one is its descendant.
        with tracer.start_as_current_span(
            "request received",
            kind=trace.SpanKind.SERVER,
            attributes={
                "sidekick.request_id": request_id,
                "sidekick.principal": principal,
                "sidekick.surface": surface,
            },
        ):
            return await self._accept(principal, session_id, text, new, session, taken)

    async def _accept(
        self,
        principal: str,
        session_id: str,
        text: str,
        new: Submission,
        session: lanes.Session,
        taken: Callable[[Taken], None] | None,
    ) -> Accepted:
        request_id = new.request_id
        seen = self.deliveries.take(session_id) if self.deliveries else []
        try:
            place = await lanes.claim(
                self.bus,
                session_id,
                request_id,
                new.if_busy,
                known=session,
                delivered=seen,
                aside=new.parked_aside,
            )
        except lanes.Busy:
            self.limits.release(request_id)
            self._give_back(session_id, seen)
            raise
        except Exception as exc:
            self.limits.release(request_id)
            self._give_back(session_id, seen)
            log.warning("could not queue a request: %r", exc)
            raise Unavailable(
                "Sidekick could not accept the message (the bus is unavailable); please retry."
            ) from exc
        self.copies.wrote(session_id, place.session)
        record = RequestRecord(
            session_id=session_id,
            principal=principal,
            text=text,
            push=new.push,
            seal=secrets.token_hex(8),
            state="accepted" if place.position == 0 else "queued",
            status="started",
            trace_id=current_trace_id(),
            **lanes.options(new, lanes.OPTIONS),
        )
        accepted = Accepted(request_id, fresh=True, behind=place.behind, position=place.position)
        try:
            created = await records(self.bus).create(record)
            if created is None:
                self.limits.release(request_id)
                raise Conflict(f"The request id {request_id} is already in use.")
            if taken is not None:  # from here on another hop may start it and answer
                taken(accepted)
            await self.index.remember(principal, request_id)
            if place.position == 0:
                # With the session as written: the frontline need not read it.
                await lanes.publish(self.bus, created, session=place.session)
            else:
                await self._queued(request_id, session_id, place)
            if place.start is not None:  # the request before was stale: its successor is due
                await lanes.start(self.bus, place.start, place.session)
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
            await lanes.start(self.bus, request_id, now)

    async def _answer(
        self,
        principal: str,
        request_id: str,
        words: Words,
        taken: Callable[[Taken], None] | None,
    ) -> Answered:
        """Resume a parked request with the user's answers (ClarificationAnswered), or with
        their decision on the approval it waits for. Exactly one of several concurrent answers
        wins: each moves the request's record from awaiting_clarification by compare-and-set,
        and every other one gets Conflict. `taken` is told when this answer has won, before
        the request can go on."""
        tracked = await self._owned(principal, request_id)
        answers.check_tool_results(tracked.value, words)
        if tracked.value.state == "awaiting_approval" or words.approval_id is not None:
            said = words.text or next(iter(words.answers.values()), "")
            record = await self.decide(principal, tracked, said, words.approval_id)
            resumed = Answered(request_id, record)
            if taken is not None:
                taken(resumed)
            return resumed
        return await answers.resume(self.bus, self.limits, tracked, words, taken, self.copies)

    async def decide(
        self, principal: str, tracked: Tracked, words: str, approval_id: str | None
    ) -> RequestRecord:
        """`principal`'s decision (in words) on the approval the request waits for, which
        resumes it (services/gateway/core/approving.py)."""
        try:
            record = await approving.decide(self.bus, principal, tracked, words, approval_id)
        except approving.Expired as exc:  # refused, but the request goes on, declined
            self.limits.admit(exc.record.principal, exc.record.request_id)
            raise
        # Counted as in flight again, for its own principal, until its end arrives (a
        # decision is never undone for the per-minute limit: it was taken).
        self.limits.admit(record.principal, record.request_id)
        return record

    async def cancel(
        self,
        principal: str,
        request_id: str,
        before: Callable[[RequestRecord], Awaitable[None]] | None = None,
    ) -> RequestRecord:
        """Ask every hop to stop the request. NotFound for others'; Conflict once it ended.
        `before` is told the request before the cancel is sent (a socket holds its session
        from then on)."""
        status = await self.owned(principal, request_id)
        if status.ended:
            raise Conflict(f"Request {request_id} has already ended ({status.status}).")
        if before is not None:
            await before(status)
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

    async def recent(self, principal: str, limit: int) -> list[str]:
        """The principal's request ids, newest first."""
        return await self.index.recent(principal, limit)
