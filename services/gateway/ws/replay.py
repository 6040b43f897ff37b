"""What a socket missed: the outcomes that ended (or asked) while no socket of its session was
there, and a question still open, each shown once per socket; the same for every socket this
gateway holds once its bus connection is back (core/catchup.py). A result a socket here was given
live is not missed, although the session's record lists it until the note of it is written
(core/deliveries.py)."""

from __future__ import annotations

import logging

from contracts import ClarificationRequested, Outcome
from contracts.frames import ReplayEvent
from services.gateway.core.hub import Hub
from services.gateway.core.intake import Intake
from services.gateway.ws.connection import Connection
from services.gateway.ws.frames import outcome_frames
from services.runtime.bus.core import Bus
from services.runtime.requests import lanes
from services.runtime.requests.sessions import mark_delivered, write_session

log = logging.getLogger("sidekick.gateway")


class Replay:
    def __init__(self, bus: Bus, hub: Hub[Connection], intake: Intake) -> None:
        self.bus = bus
        self.hub = hub
        self.intake = intake

    async def stored(self, conn: Connection, request_id: str) -> None:
        """A retried request id: its stored outcome, if it already ended."""
        outcome = await self.intake.outcome(request_id)
        if outcome is not None:  # asked for again: send it even if this socket saw it
            conn.mark_seen(outcome.event_id)
            for frame in outcome_frames(conn, outcome):
                conn.send(frame)

    async def catch_up(self) -> None:
        """The replay, to every socket this gateway holds (its bus connection came back)."""
        for session_id, conns in list(self.hub.sessions.items()):
            for conn in list(conns):
                if not conn.closed:
                    await self.replay(conn, session_id)

    async def replay(self, conn: Connection, session_id: str) -> None:
        """Send what ended (or asked) while no socket of the session was there, and a question
        still open; then those results count as delivered."""
        try:
            if self.intake.deliveries is not None:  # what this gateway's sockets saw is noted
                await self.intake.deliveries.write(session_id)
            # Read, not this gateway's copy: what it decides here writes nothing.
            session = await lanes.load(self.bus, session_id)
            copies = self.intake.copies
            copies.wrote(session_id, session)
            record = session.value
            sent: list[str] = []
            deliveries = self.intake.deliveries
            live = deliveries.delivered_here(session_id) if deliveries is not None else set()
            for request_id in record.undelivered:
                if request_id in live:
                    continue  # a socket here was given it live: not missed; its note is coming
                outcome = await self.intake.outcome(request_id)
                sent.append(request_id)
                if outcome is None or outcome.session_id != session_id:
                    continue
                if isinstance(outcome, ClarificationRequested) and record.parked != request_id:
                    continue  # answered since; its end will come
                await self._send(conn, outcome)
            if record.parked is not None and record.parked not in sent:
                outcome = await self.intake.outcome(record.parked)
                if isinstance(outcome, ClarificationRequested):
                    await self._send(conn, outcome)
            if sent:
                written = await write_session(
                    self.bus, session_id, lambda rec: mark_delivered(rec, sent), known=session
                )
                if written is not None:
                    copies.wrote(session_id, written)
        except Exception as exc:  # the live socket must survive a store hiccup
            log.warning("could not replay session %s: %r", session_id, exc)

    async def _send(self, conn: Connection, outcome: Outcome) -> None:
        if conn.mark_seen(outcome.event_id):
            if conn.events:  # the whole answer follows: a client may drop what it streamed
                conn.send(ReplayEvent(event="replay", request_id=outcome.request_id))
            for frame in outcome_frames(conn, outcome):
                conn.send(frame)
