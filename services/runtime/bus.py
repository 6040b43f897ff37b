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
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from faststream import AckPolicy
from faststream.nats import (
    ConsumerConfig,
    DeliverPolicy,
    JStream,
    NatsBroker,
    NatsMessage,
    PullSub,
)
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.kv import KeyValue
from pydantic import BaseModel, ValidationError

from contracts import Event, Subjects
from contracts.events import DeadLetter
from services.runtime import topology
from services.runtime.lifecycle import Requests
from services.runtime.logs import request_context
from services.runtime.metrics import DEAD_LETTERS
from services.runtime.natsauth import inbox_prefix
from services.runtime.settings import Settings

log = logging.getLogger("sidekick.bus")

E = TypeVar("E", bound=Event)

DAY = 24 * 3600
# Client-bound events that are also kept (the results stream).
TERMINAL_SUFFIXES = (".completed", ".failed", ".clarification", ".cancelled")


def msg_id(request_id: str, step: str, attempt: int | None = None) -> str:
    """Dedupe key of one publish: the same (request, step, attempt) is stored once."""
    return f"{request_id}:{step}" if attempt is None else f"{request_id}:{step}:{attempt}"


class Buckets:
    """The KV buckets a service's role may use (services/runtime/topology.py), bound at start.
    Asking for another is a bug in the service, said plainly rather than as a NATS error."""

    def __init__(self, service: str, bound: dict[str, KeyValue]) -> None:
        self._service = service
        self._bound = bound

    def get(self, name: str) -> KeyValue:
        kv = self._bound.get(name)
        if kv is None:
            raise PermissionError(
                f"the {self._service} service has no use of the {name!r} bucket "
                "(its role in services/runtime/topology.py does not grant it)"
            )
        return kv

    @property
    def requests(self) -> KeyValue:
        return self.get("requests")

    @property
    def sessions(self) -> KeyValue:
        return self.get("sessions")

    @property
    def ledger(self) -> KeyValue:
        return self.get("ledger")

    @property
    def status(self) -> KeyValue:
        return self.get("status")

    @property
    def cache(self) -> KeyValue:
        return self.get("cache")


class Bus:
    """One service's view of NATS: the broker, names, JetStream context and buckets."""

    def __init__(self, broker: NatsBroker, settings: Settings, service: str) -> None:
        self.broker = broker
        self.settings = settings
        self.service = service
        self.subjects = Subjects(settings.namespace)
        self._buckets: Buckets | None = None
        self._js: JetStreamContext | None = None

    async def setup(self, *, wait: float | None = None) -> None:
        """Connect and bind to the role's buckets and consumers, which the bootstrap step made
        (waiting for it, with one log line, up to `wait` seconds; forever when None)."""
        client: Client = await self.broker.connect()
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

    @property
    def js(self) -> JetStreamContext:
        assert self._js is not None, "Bus.setup() has not run"
        return self._js

    @property
    def kv(self) -> Buckets:
        assert self._buckets is not None, "Bus.setup() has not run"
        return self._buckets

    @property
    def requests(self) -> Requests:
        """Request records, moved as this service (see services/runtime/lifecycle.py)."""
        return Requests(self.kv.status, self.service)

    async def publish(self, event: BaseModel, subject: str, *, dedupe_key: str) -> None:
        """Durable publish on JetStream; the server drops a second copy with the same key."""
        await self.broker.publish(
            event.model_dump_json().encode(),
            subject,
            headers={"Nats-Msg-Id": dedupe_key, "content-type": "application/json"},
            stream=self._stream_for(subject),
            timeout=10,
        )

    async def emit(self, event: BaseModel, subject: str) -> None:
        """Fire-and-forget publish on core NATS (stream chunks, progress)."""
        await self.broker.publish(
            event.model_dump_json().encode(),
            subject,
            headers={"content-type": "application/json"},
        )

    def _stream_for(self, subject: str) -> str:
        s = self.subjects
        if subject.startswith(f"{s.namespace}.out.") and subject.endswith(TERMINAL_SUFFIXES):
            return s.results_stream
        if subject.startswith(f"{s.namespace}.deadletter."):
            return s.deadletter_stream
        return s.work_stream

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
        consumer is made by the bootstrap step (topology.py); the service only binds to it."""
        settings = self.settings
        declared = topology.consumers(self.subjects).get(consumer)
        if declared != subject:
            raise ValueError(
                f"consumer {consumer!r} of {subject} is not in services/runtime/topology.py"
            )
        config = topology.consumer_config(self.subjects, consumer, settings)

        @self.broker.subscriber(
            subject,
            stream=JStream(self._stream_for(subject), declare=False),
            durable=topology.durable_name(self.subjects, consumer),
            pull_sub=PullSub(batch_size=min(settings.max_concurrency, 16), timeout=2.0),
            config=ConsumerConfig(
                ack_wait=config.ack_wait,
                max_deliver=config.max_deliver,
                max_ack_pending=config.max_ack_pending,
                deliver_policy=DeliverPolicy.ALL,
                filter_subject=subject,
            ),
            ack_policy=AckPolicy.MANUAL,
            max_workers=settings.max_concurrency,
            # Fetched messages come to the service's own inbox (FastStream's default is _INBOX.).
            inbox_prefix=f"{inbox_prefix(self.service)}.".encode(),
        )
        async def _consume() -> None:
            # Read from the context rather than declared as `msg: NatsMessage`: FastDepends
            # resolves such a parameter in a worker thread, for every message (~0.3 ms of CPU
            # and a thread round trip per message; see `python -m bench.hotspots`).
            msg: NatsMessage = self.broker.context.get_local("message")
            await self._deliver(msg, subject, model, handler, on_exhausted)

    async def _deliver(
        self,
        msg: NatsMessage,
        subject: str,
        model: type[E],
        handler: Callable[[E], Awaitable[None]],
        on_exhausted: Callable[[E, BaseException], Awaitable[None]] | None,
    ) -> None:
        raw = msg.raw_message
        try:
            event = model.model_validate_json(raw.data)
        except ValidationError as exc:
            log.error("poison message on %s: %s", subject, exc.errors()[:3])
            await self.dead_letter(
                self.service,
                f"invalid: {exc.error_count()} errors",
                raw.data,
                dict(raw.headers or {}),
            )
            await msg.reject()
            return
        with request_context(event.request_id):  # every log line below names the request
            delivered = raw.metadata.num_delivered if raw.metadata else 1
            beat = asyncio.create_task(self._heartbeat(msg))
            try:
                await handler(event)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if delivered >= self.settings.max_deliver:
                    log.exception("giving up on %s after %d deliveries", subject, delivered)
                    await self.dead_letter(
                        self.service, f"exhausted: {exc!r}"[:500], raw.data, dict(raw.headers or {})
                    )
                    if on_exhausted is not None:
                        await on_exhausted(event, exc)
                    await msg.reject()
                else:
                    log.warning("retrying %s (delivery %d)", subject, delivered, exc_info=exc)
                    await msg.nack(delay=min(2.0**delivered, 30.0))
                return
            finally:
                beat.cancel()
            await msg.ack()

    async def _heartbeat(self, msg: NatsMessage) -> None:
        while True:
            await asyncio.sleep(self.settings.heartbeat_interval)
            with contextlib.suppress(Exception):
                await msg.in_progress()
