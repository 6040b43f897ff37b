"""One request's client-bound events, in the order they were published, from the results stream
(which keeps every `out.<session>.<request>.*` event but the live chunks: the outcomes, the
progress and steps, and the reply's text, coalesced).

A follower is an ordered, ephemeral JetStream consumer filtered on the request's subjects. It
delivers what is stored (from a given stream sequence on) and then, on the same subscription,
what is published after, each with its stream sequence: so a stream a client re-attaches to
(A2A `SubscribeToTask`, AG-UI `Last-Event-ID`) is what was stored, then the live events, with no
gap and no duplicate, on whichever gateway replica it reaches. The sequence is the position a
client's event id names.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

import nats.js.errors
from nats.aio.msg import Msg
from nats.js.api import ConsumerConfig, DeliverPolicy
from pydantic import ValidationError

from contracts import AnyEvent, parse_event
from services.gateway.core.errors import Unavailable
from services.runtime.bus.core import Bus

log = logging.getLogger("sidekick.gateway")

KEEPALIVE = 15.0  # seconds of silence after which a follower yields None (an SSE comment)


@dataclass(frozen=True)
class Stored:
    """One stored event and its place in the results stream."""

    seq: int
    event: AnyEvent


class Feed:
    def __init__(self, bus: Bus) -> None:
        self.bus = bus

    async def follow(
        self, request_id: str, after: int = 0, *, keepalive: float = KEEPALIVE
    ) -> AsyncIterator[Stored | None]:
        """The request's events stored after stream sequence `after`, then the live ones, until
        the caller stops iterating. None after `keepalive` seconds without one."""
        s = self.bus.subjects
        queue: asyncio.Queue[Msg] = asyncio.Queue()

        async def take(msg: Msg) -> None:
            queue.put_nowait(msg)

        config = ConsumerConfig(
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE if after else DeliverPolicy.ALL,
            opt_start_seq=after + 1 if after else None,
            inactive_threshold=60.0,
        )
        sub = await self.bus.js.subscribe(
            s.out_of(request_id),
            stream=s.results_stream,
            cb=take,
            ordered_consumer=True,
            config=config,
            idle_heartbeat=5.0,
        )
        try:
            while True:
                try:
                    msg = await asyncio.wait_for(queue.get(), keepalive)
                except TimeoutError:
                    yield None
                    continue
                try:
                    event = parse_event(msg.data)
                except ValidationError:
                    log.warning("skipping an unreadable stored event on %s", msg.subject)
                    continue
                yield Stored(msg.metadata.sequence.stream, event)
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    async def last(self, subject: str) -> int:
        """The stream sequence of the last event stored on `subject` (0: none); Unavailable
        when the bus cannot say."""
        try:
            msg = await self.bus.js.get_last_msg(self.bus.subjects.results_stream, subject)
        except nats.js.errors.NotFoundError:
            return 0
        except Exception as exc:
            raise Unavailable("The event store is unavailable; please retry.") from exc
        return int(msg.seq or 0)
