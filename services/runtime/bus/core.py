"""The durable bus: a service's binding to the topology (topology.py), publishing with dedupe
keys, and the consumer wrapper every service uses for work that must not be lost.

A durable handler gets one typed event. The wrapper acks only after the handler returns (so its
output was published), sends in-progress heartbeats while it runs, rejects poison input at
once (to the dead-letter stream), naks transient failures with a delay, and on the last allowed
delivery hands the event to an `on_exhausted` callback so the request still ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Protocol, TypeVar

import nats.errors
import nats.js.errors
from faststream.nats import NatsBroker
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.kv import KeyValue
from opentelemetry import propagate, trace
from pydantic import BaseModel, ValidationError

from contracts import Event, Subjects, utcnow
from contracts.base import DeadLetter
from contracts.subjects import Derived
from services.runtime.base.logs import request_context
from services.runtime.base.metrics import BUS_HANDLED, BUS_IN_PROGRESS, BUS_SECONDS, DEAD_LETTERS
from services.runtime.base.settings import Settings
from services.runtime.bus import poison, sealing, topology
from services.runtime.bus.consumer import Consumer

log = logging.getLogger("sidekick.bus")
tracer = trace.get_tracer("sidekick.bus")

E = TypeVar("E", bound=Event)
E_in = TypeVar("E_in", bound=Event, contravariant=True)
B = TypeVar("B")
Handler = Callable[[Msg], Awaitable[None]]

# Client-bound events published durably (acked) on the results stream; progress and stored text
# are published on core NATS and kept by the same stream as they pass.
TERMINAL_SUFFIXES = (".completed", ".failed", ".clarification", ".cancelled")


# What a call to the bus raises while the bus is away (a timeout, a closed or reconnecting
# connection, JetStream without a leader): an outage to ride out, not a bug in the code.
OUTAGE_ERRORS = (
    TimeoutError,
    nats.errors.ConnectionClosedError,
    nats.errors.ConnectionReconnectingError,
    nats.errors.NoServersError,
    nats.errors.NoRespondersError,
    nats.errors.StaleConnectionError,
    nats.js.errors.ServiceUnavailableError,
    # A stream between leaders (a cluster node died): the publish found no one to store it.
    nats.js.errors.NoStreamResponseError,
)


def outage(exc: BaseException) -> bool:
    """Whether `exc` says the bus is away (logged as one line, never with a traceback)."""
    return isinstance(exc, OUTAGE_ERRORS)


# How many times the message being handled (in this task) has been delivered: 1 the first time.
_DELIVERED: contextvars.ContextVar[int] = contextvars.ContextVar("delivered", default=1)


def redelivered() -> bool:
    """Whether the durable message being handled was delivered before (its first handler may
    have died after doing part of the work)."""
    return _DELIVERED.get() > 1


def msg_id(request_id: str, step: str, attempt: int | None = None) -> str:
    """Dedupe key of one publish: the same (request, step, attempt) is stored once."""
    return f"{request_id}:{step}" if attempt is None else f"{request_id}:{step}:{attempt}"


def answer_key(request_id: str, step: str, attempt: int, dispatch_token: str | None) -> str:
    """Dedupe key of an answer (a worker's result, a verdict) to a message that carried an
    unguessable `dispatch_token`: only the asker and the one asked can compute it, so no other
    service can publish first under it and have the real answer dropped as a duplicate."""
    proof = hashlib.sha256((dispatch_token or "").encode()).hexdigest()[:32]
    return f"{msg_id(request_id, step, attempt)}:{proof}"


class Consumes(Protocol[E_in]):
    """What handles one durable consumer's events: each event, and one whose deliveries ran
    out (so the request still ends)."""

    async def handle(self, event: E_in, /) -> None: ...

    async def exhausted(self, event: E_in, exc: BaseException, /) -> None: ...


def _set_up(bound: B | None) -> B:
    assert bound is not None, "Bus.setup() has not run"
    return bound


def _granted(name: str) -> Derived[Buckets, KeyValue]:
    return Derived(lambda buckets: buckets.get(name))


class Buckets:
    """The KV buckets a service's role may use (services/runtime/bus/topology.py), bound at start.
    Asking for another is a bug in the service, said plainly rather than as a NATS error."""

    sessions = _granted("sessions")
    ledger = _granted("ledger")
    approvals = _granted("approvals")
    budgets = _granted("budgets")
    status = _granted("status")
    cache = _granted("cache")
    parked = _granted("parked")

    def __init__(self, service: str, bound: dict[str, KeyValue]) -> None:
        self._service = service
        self._bound = bound

    def get(self, name: str) -> KeyValue:
        kv = self._bound.get(name)
        if kv is None:
            raise PermissionError(
                f"the {self._service} service has no use of the {name!r} bucket "
                "(its role in services/runtime/bus/topology.py does not grant it)"
            )
        return kv


class Bus:
    """One service's view of NATS: the broker, names, JetStream context and buckets."""

    def __init__(self, broker: NatsBroker, settings: Settings, service: str) -> None:
        self.broker = broker
        self.settings = settings
        self.service = service
        self.subjects = Subjects(settings.namespace)
        self._buckets: Buckets | None = None
        self._nc: Client | None = None
        self._listeners: list[tuple[str, str, Handler]] = []
        self._each: list[str] = []
        self._durables: list[tuple[str, str, Handler]] = []
        self._consumers: list[Consumer] = []
        self._ticker: asyncio.Task[None] | None = None
        self._listening: tuple[datetime, int] | None = None
        self._js: JetStreamContext | None = None
        self._secret: bytes | None = None

    async def setup(self, *, wait: float | None = None) -> None:
        """Connect and bind to the role's buckets and consumers, which the bootstrap step made
        (waiting for it, with one log line, up to `wait` seconds; forever when None)."""
        client: Client = await self.broker.connect()
        self._nc = client
        self._js = client.jetstream()
        bound = await topology.bind(self._js, self.settings, self.service, wait=wait)
        self._buckets = Buckets(self.service, bound)

    async def bucket(self, name: str) -> KeyValue:
        """One of the role's buckets by name (e.g. the gateway's `index`)."""
        return self.kv.get(name)

    @property
    def connected(self) -> bool:
        try:
            return bool(self.broker.connection.is_connected)
        except Exception:  # not connected yet
            return False

    # What setup() binds: the connection, its JetStream context and the role's buckets.
    nc: Derived[Bus, Client] = Derived(lambda bus: _set_up(bus._nc))
    js: Derived[Bus, JetStreamContext] = Derived(lambda bus: _set_up(bus._js))
    kv: Derived[Bus, Buckets] = Derived(lambda bus: _set_up(bus._buckets))

    def own_key(self, key: str) -> str:
        """`key` sealed with this role's own login secret (sealing.py): no other role can
        publish first under it and have this role's message dropped as a duplicate."""
        if self._secret is None:
            self._secret = sealing.role_secret(self.settings, self.service)
        return sealing.seal(self._secret, self.service, key)

    async def publish(self, event: BaseModel, subject: str, *, dedupe_key: str) -> None:
        """Durable publish on JetStream; the server drops a second copy with the same key. The
        trace context goes along in the headers, so the consumer's span continues the trace."""
        headers = {"Nats-Msg-Id": dedupe_key}
        propagate.inject(headers)
        await self.js.publish(
            subject,
            event.__pydantic_serializer__.to_json(event),
            headers=headers,
            stream=self._stream_for(subject),
            timeout=10,
        )

    async def emit(self, event: BaseModel, subject: str) -> None:
        """Fire-and-forget publish on core NATS (stream chunks, progress) straight through the
        NATS client: no span, no per-message metrics (~10 us instead of ~80 us through the
        broker's middlewares; `python -m bench.hotspots`)."""
        await self.nc.publish(subject, event.__pydantic_serializer__.to_json(event))

    def listening_since(self) -> datetime | None:
        """Since when this process has heard every core message of its subscriptions (none
        were missed in a disconnection since); None before it started."""
        if self._listening is None:
            return None
        since, reconnects = self._listening
        if self.nc.stats["reconnects"] != reconnects:  # a gap: count from now on
            self._listening = since, reconnects = utcnow(), self.nc.stats["reconnects"]
        return since

    def listen(self, subject: str, handler: Handler, *, queue: str = "") -> None:
        """A plain core-NATS subscription made at `start()`, its messages handled one at a
        time, in order; with `queue`, one of the group's subscribers gets each message."""
        self._listeners.append((subject, queue, handler))

    def listens_each(self, pattern: str) -> None:
        """Declare subscriptions made and dropped as it runs (the gateway's, per session)."""
        self._each.append(pattern)

    def subscriptions(self) -> list[str]:
        """Every subject this service consumes: the broker's subscribers, its durable consumers
        and its plain subscriptions (tests/runtime/test_contracts.py checks them against the bus
        table)."""
        return [
            *(sub.subject.broker_address for sub in self.broker.subscribers),  # type: ignore[attr-defined]
            *(subject for subject, _, _ in self._durables),
            *(subject for subject, _, _ in self._listeners),
            *self._each,
        ]

    def _stream_for(self, subject: str) -> str:
        s = self.subjects
        if subject.startswith(f"{s.namespace}.out.") and subject.endswith(TERMINAL_SUFFIXES):
            return s.results_stream
        first = subject.removeprefix(f"{s.namespace}.").split(".", 1)[0]
        return {"deadletter": s.deadletter_stream, "push": s.push_stream}.get(first, s.work_stream)

    async def dead_letter(
        self, source: str, reason: str, data: bytes, headers: dict[str, str]
    ) -> None:
        DEAD_LETTERS.labels(source, reason.split(":")[0][:40]).inc()
        text: str | None = None
        with contextlib.suppress(UnicodeDecodeError):
            text = data.decode()
        record = DeadLetter(source=source, reason=reason, headers=headers, body=text)
        await self.broker.publish(
            record.model_dump_json(exclude_none=True).encode(),
            self.subjects.deadletter(source),
            stream=self.subjects.deadletter_stream,
            timeout=10,
        )

    def durable(
        self,
        subject: str,
        model: type[E],
        handler: Callable[[E], Awaitable[None]],
        *,
        consumer: str,
        on_exhausted: Callable[[E, BaseException], Awaitable[None]] | None = None,
    ) -> None:
        """Register `handler` as the durable, load-shared consumer `consumer` of `subject`. The
        consumer is made by the bootstrap step (topology.py); the service binds to it and reads
        it with a standing pull (consumer.py) once started."""
        declared = topology.consumers(self.subjects).get(consumer)
        if declared != subject:
            raise ValueError(
                f"consumer {consumer!r} of {subject} is not in services/runtime/bus/topology.py"
            )
        acked, seconds = BUS_HANDLED.labels(consumer, "acked"), BUS_SECONDS.labels(consumer)
        in_progress = BUS_IN_PROGRESS.labels(consumer)

        async def deliver(msg: Msg) -> None:
            with in_progress.track_inprogress():
                started = time.perf_counter()
                result = await self._deliver(msg, subject, model, handler, on_exhausted)
                if result == "acked":
                    acked.inc()
                else:
                    BUS_HANDLED.labels(consumer, result).inc()
                seconds.observe(time.perf_counter() - started)

        self._durables.append((subject, consumer, deliver))

    def pushes(self, consumer: str, deliver: Callable[[Msg], Awaitable[None]]) -> None:
        """PUSH's durable `consumer` (topology.push_consumers), read raw: `deliver` acks."""
        self._durables.append((self.subjects.push_any("*"), consumer, deliver))

    def consume(self, subject: str, model: type[E], handler: Consumes[E], *, consumer: str) -> None:
        """`durable()` for a handler object: its `handle`, and its `exhausted` at the end."""
        self.durable(
            subject, model, handler.handle, consumer=consumer, on_exhausted=handler.exhausted
        )

    async def start(self) -> None:
        """Subscribe what `listen` declared and start reading the durable consumers (after
        `setup()`); one ticker keeps the messages being handled alive (in-progress acks)."""
        self._listening = (utcnow(), self.nc.stats["reconnects"])
        for subject, queue, handler in self._listeners:
            await self.nc.subscribe(subject, queue=queue, cb=handler)
        capacity = self.settings.max_concurrency
        for subject, name, deliver in self._durables:
            durable = topology.durable_name(self.subjects, name)
            consumer = Consumer(self.nc, self._stream_for(subject), durable, capacity, deliver)
            await consumer.start()
            self._consumers.append(consumer)
        if self._consumers:
            self._ticker = asyncio.create_task(self._keep_alive())

    async def stop(self, grace: float = 5.0) -> None:
        """Stop taking work; give the handlers running `grace` seconds to finish."""
        if self._ticker is not None:
            self._ticker.cancel()
        await asyncio.gather(*(c.stop(grace) for c in self._consumers))

    async def _keep_alive(self) -> None:
        interval = self.settings.heartbeat_interval
        while True:
            await asyncio.sleep(interval / 2)
            for consumer in self._consumers:
                await consumer.keep_alive(interval)

    async def _deliver(
        self,
        msg: Msg,
        subject: str,
        model: type[E],
        handler: Callable[[E], Awaitable[None]],
        on_exhausted: Callable[[E, BaseException], Awaitable[None]] | None,
    ) -> str:
        """Handle one message: its result (acked, rejected, retried, dead-lettered)."""
        try:
            event = model.model_validate_json(msg.data)
        except ValidationError as exc:
            poison.refused(subject, msg.data, poison.why(exc))
            await self.dead_letter(
                self.service, f"invalid: {exc.error_count()} errors", msg.data, msg.headers or {}
            )
            await msg.term()
            return "rejected"
        delivered = msg.metadata.num_delivered
        _DELIVERED.set(delivered)  # this task's own context: the handler's, and its tasks'
        parent = propagate.extract(msg.headers) if msg.headers else None
        with (
            request_context(event.request_id),  # every log line below names the request
            tracer.start_as_current_span(
                f"{subject} process",
                context=parent,
                kind=trace.SpanKind.CONSUMER,
                attributes={
                    "messaging.system": "nats",
                    "messaging.operation": "process",
                    "messaging.destination.name": subject,
                    "messaging.nats.delivered": delivered,
                },
            ) as span,
        ):
            try:
                await handler(event)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                span.record_exception(exc)
                span.set_status(trace.Status(trace.StatusCode.ERROR, type(exc).__name__))
                away = outage(exc)
                if delivered >= self.settings.max_deliver:
                    if away:
                        said = "giving up on %s after %d deliveries: the bus did not answer (%r)"
                        log.warning(said, subject, delivered, exc)
                    else:
                        log.exception("giving up on %s after %d deliveries", subject, delivered)
                    await self.dead_letter(
                        self.service, f"exhausted: {exc!r}"[:500], msg.data, msg.headers or {}
                    )
                    if on_exhausted is not None:
                        await on_exhausted(event, exc)
                    await msg.term()
                    return "dead_lettered"
                if away:
                    said = "retrying %s (delivery %d): the bus did not answer (%r)"
                    log.warning(said, subject, delivered, exc)
                else:
                    log.warning("retrying %s (delivery %d)", subject, delivered, exc_info=exc)
                await msg.nak(delay=min(2.0**delivered, 30.0))
                return "retried"
        await msg.ack()
        return "acked"
