"""Client-bound events, from the bus to the hub, for the sessions this gateway holds.

Every client-bound subject names its session (`out.<session>.<request>.<what>`, contracts/
subjects.py), so a gateway subscribes to the sessions its sockets and HTTP callers hold, one
subscription each (`hold`, `release`), and hears nothing of the others: G gateways do not each
decode every event. A session's chunks, progress and end arrive on its one subscription, in the
order they were published. Plain NATS subscriptions: these are the busiest messages of all (a
reply's chunks), and the gateway only routes them; a consume span and the broker's metrics each
cost more than that. Events published on JetStream carry the publisher's ack inbox as reply
subject; it is never answered (that would race the server's PubAck, and NATS permissions forbid
it).

The same subscription brings every write of the session's record, which the server republishes
from the `sessions` bucket (`out.<session>.session`, its revision in a header): the gateway
keeps the latest (`SessionCopies`), so taking a session's next message starts from it instead
of reading it (services/gateway/core/intake.py; a copy is only ever the start of a
compare-and-set). The stored text of a reply (`...text`) is for clients that re-attach and read
the results stream; live clients have its chunks, so it is skipped unread.

On the way: an end frees its request's place in the limits. A worker's pipeline step (`...step`)
is written into the request's record by one gateway of all (a queue group), which hears every
step, whoever holds the session (workers may not write records themselves)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from typing import Any

from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from pydantic import ValidationError

from contracts import OUTCOMES, Progress, parse_event
from services.gateway.core.copies import SessionCopies
from services.gateway.core.hub import Hub
from services.gateway.core.limits import Limits
from services.runtime.base.metrics import GATEWAY_EVENTS
from services.runtime.bus import poison
from services.runtime.bus.core import Bus
from services.runtime.requests.outcomes import record_step

log = logging.getLogger("sidekick.gateway")

SEQUENCE = "Nats-Sequence"
OPERATION = "KV-Operation"


class Outbound:
    def __init__(
        self, bus: Bus, hub: Hub[Any], limits: Limits, copies: SessionCopies | None = None
    ) -> None:
        self.bus = bus
        self.hub = hub
        self.limits = limits
        self.copies = copies or SessionCopies()
        self.copies.held = self.holds
        self.copies.epoch = lambda: int(bus.nc.stats["reconnects"])
        self._held: dict[str, int] = {}
        self._subs: dict[str, Subscription] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        hub.taps = self

    def listen(self) -> None:
        s = self.bus.subjects
        self.bus.listens_each(f"{s.namespace}.out.*.>")  # hold(): one session each
        self.bus.listen(s.steps_all, self.on_step, queue=f"{s.namespace}_gateway_steps")

    async def hold(self, session_id: str) -> None:
        """Hear the session's events (and its record's writes) until as many `release`s."""
        held = self._held.get(session_id, 0)
        self._held[session_id] = held + 1
        if held:
            return
        # The subscription is queued on the connection before anything this gateway sends
        # after it, so none of what that causes is missed.
        subject = self.bus.subjects.out_session(session_id)

        async def on(msg: Msg) -> None:
            await self.on_out(session_id, msg)

        try:
            sub = await self.bus.nc.subscribe(subject, cb=on)
        except Exception:
            self.release(session_id)
            raise
        if session_id in self._held:
            self._subs[session_id] = sub
        else:  # released while it was being made
            self._background(_unsubscribe(sub))

    def release(self, session_id: str) -> None:
        held = self._held.get(session_id, 0) - 1
        if held > 0:
            self._held[session_id] = held
            return
        self._held.pop(session_id, None)
        self.copies.forget(session_id)
        sub = self._subs.pop(session_id, None)
        if sub is not None:
            self._background(_unsubscribe(sub))

    def holds(self, session_id: str) -> bool:
        return session_id in self._held

    async def on_out(self, session_id: str, msg: Msg) -> None:
        subject = msg.subject
        if subject.endswith(".session"):
            self._session_written(session_id, msg)
            return
        if subject.endswith(".text"):
            return  # the reply's text as stored: live clients had it as chunks
        try:
            event = parse_event(msg.data)
        except ValidationError as exc:
            poison.refused(subject, msg.data, poison.why(exc), kind=self.bus.subjects.out_all)
            return
        GATEWAY_EVENTS.labels(event.kind).inc()
        if isinstance(event, OUTCOMES):
            self.limits.release(event.request_id)
        self.hub.dispatch(event)

    def _session_written(self, session_id: str, msg: Msg) -> None:
        headers = msg.headers or {}
        if headers.get(OPERATION) in ("DEL", "PURGE") or not msg.data:
            self.copies.forget(session_id)
            return
        revision = headers.get(SEQUENCE, "")
        if revision.isdigit():
            self.copies.heard(session_id, int(revision), msg.data)

    async def on_step(self, msg: Msg) -> None:
        """A worker's step (researching, synthesizing, ...) into the request's record; one
        gateway of all hears each (a queue group)."""
        try:
            step = Progress.model_validate_json(msg.data)
        except ValidationError as exc:
            poison.refused(msg.subject, msg.data, poison.why(exc), kind=self.bus.subjects.out_all)
            return
        if step.workflow_status is not None:
            self._background(self._record(step))

    async def _record(self, step: Progress) -> None:
        assert step.workflow_status is not None
        try:
            await record_step(self.bus, step.request_id, step.workflow_status, step.detail)
        except Exception as exc:
            log.warning("could not record a step of %s: %r", step.request_id, exc)

    def _background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


async def _unsubscribe(sub: Subscription) -> None:
    with contextlib.suppress(Exception):  # closed or reconnecting: the server forgets it
        await sub.unsubscribe()
