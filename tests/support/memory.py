"""The fast tier's stand-ins for NATS, in memory: FastStream's own TestNatsBroker (handlers
called in process, as FastStream's docs recommend) and a JetStream KV bucket with the same
revision semantics as the server's (compare-and-set on the last revision, create-if-absent,
filtered watches). The same test bodies run against the real nats-server through the `stack`
and `kv` fixtures' "nats" side, which is what keeps these honest.

    MemoryKV      one bucket: get / put / create / update / delete / keys / watch
    MemoryStore   the buckets of one test, shared by every service's bus
    MemoryBus     a Bus whose KV is a MemoryStore (no JetStream streams)
    MemoryBroker  TestNatsBroker that, like NATS, also hands a JetStream publish to core
                  subscribers (cancels, the gateways' `out.>`)
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Generator, Iterable
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import nats.js.errors
from faststream.nats import NatsBroker
from faststream.nats.schemas.js_stream import is_subject_match_wildcard
from faststream.nats.testing import FakeProducer, TestNatsBroker, build_message, change_producer

from services.runtime.base.settings import Settings
from services.runtime.bus import topology
from services.runtime.bus.core import Buckets, Bus


@dataclass
class Entry:
    """What `KeyValue.get` and a watch return (the fields Sidekick reads)."""

    bucket: str
    key: str
    value: bytes | None
    revision: int
    operation: str | None = None
    # When it was stored, as the server stamps a message (kvstore.get_stamped reads it).
    stored_at: datetime = field(default_factory=lambda: datetime.now(UTC))


def _matches(pattern: str, key: str) -> bool:
    """NATS subject matching on dot-separated tokens: `*` one token, `>` the rest."""
    want, have = pattern.split("."), key.split(".")
    for i, token in enumerate(want):
        if token == ">":
            return len(have) > i
        if i >= len(have) or (token != "*" and token != have[i]):
            return False
    return len(want) == len(have)


class Watcher:
    def __init__(self, kv: MemoryKV, pattern: str, ignore_deletes: bool) -> None:
        self.kv = kv
        self.pattern = pattern
        self.ignore_deletes = ignore_deletes
        self.queue: asyncio.Queue[Entry | None] = asyncio.Queue()
        self.stopped = False
        for entry in kv.entries.values():
            self.offer(entry)
        self.queue.put_nowait(None)  # the end of what is stored, as the server says it

    def offer(self, entry: Entry) -> None:
        if not _matches(self.pattern, entry.key):
            return
        if self.ignore_deletes and entry.operation is not None:
            return
        self.queue.put_nowait(entry)

    async def stop(self) -> None:
        self.stopped = True
        self.kv.watchers.discard(self)

    def __aiter__(self) -> Watcher:
        return self

    async def __anext__(self) -> Entry | None:
        if self.stopped:
            raise StopAsyncIteration
        return await self.queue.get()


class MemoryKV:
    """One KV bucket. Revisions are one sequence per bucket, as a stream's are."""

    def __init__(self, name: str, sequence: Iterable[int]) -> None:
        self.name = name
        self.entries: dict[str, Entry] = {}
        self.watchers: set[Watcher] = set()
        self._sequence = iter(sequence)

    def _write(self, key: str, value: bytes | None, operation: str | None = None) -> int:
        entry = Entry(self.name, key, value, next(self._sequence), operation)
        self.entries[key] = entry
        for watcher in list(self.watchers):
            watcher.offer(entry)
        return entry.revision

    def _live(self, key: str) -> Entry | None:
        entry = self.entries.get(key)
        return entry if entry is not None and entry.operation is None else None

    async def get(self, key: str) -> Entry:
        entry = self._live(key)
        if entry is None:
            raise nats.js.errors.KeyNotFoundError
        return entry

    async def put(self, key: str, value: bytes) -> int:
        return self._write(key, value)

    async def create(self, key: str, value: bytes) -> int:
        if self._live(key) is not None:
            raise nats.js.errors.KeyWrongLastSequenceError(description="wrong last sequence")
        return self._write(key, value)

    async def update(self, key: str, value: bytes, last: int | None = None) -> int:
        entry = self.entries.get(key)
        current = entry.revision if entry is not None else 0
        if last is not None and last != current:
            raise nats.js.errors.KeyWrongLastSequenceError(description="wrong last sequence")
        return self._write(key, value)

    async def delete(self, key: str) -> bool:
        if key not in self.entries:
            raise nats.js.errors.KeyNotFoundError
        self._write(key, None, "DEL")
        return True

    async def keys(self) -> list[str]:
        live = [k for k in self.entries if self._live(k) is not None]
        if not live:
            raise nats.js.errors.NoKeysError
        return live

    async def watch(self, keys: str, ignore_deletes: bool = False, **_: Any) -> Watcher:
        watcher = Watcher(self, keys, ignore_deletes)
        self.watchers.add(watcher)
        return watcher

    async def watchall(self, **kwargs: Any) -> Watcher:
        return await self.watch(">", **kwargs)


class MemoryStore:
    """Every bucket of one test's namespace."""

    def __init__(self) -> None:
        self.buckets: dict[str, MemoryKV] = {}
        self._sequence = itertools.count(1)

    def bucket(self, name: str) -> MemoryKV:
        if name not in self.buckets:
            self.buckets[name] = MemoryKV(name, self._sequence)
        return self.buckets[name]


class MemoryBus(Bus):
    """A service's bus whose KV lives in a MemoryStore; its broker is driven by MemoryBroker."""

    def __init__(self, settings: Settings, service: str, store: MemoryStore) -> None:
        super().__init__(NatsBroker(settings.nats_url), settings, service)
        self.store = store

    async def setup(self, *, wait: float | None = None) -> None:
        # The role's buckets, as topology.bind() gives them on the real server.
        s = self.subjects
        role = topology.roles(s)[self.service]
        names = {*role.reads, *role.writes, *role.watches}
        bound: dict[str, Any] = {n: self.store.bucket(s.bucket(n)) for n in names}
        self._buckets = Buckets(self.service, bound)

    async def bucket(self, name: str) -> Any:
        return self.kv.get(name)


class _BothProducer(FakeProducer):
    """Delivers a JetStream publish to the stream's consumers and to core subscribers alike,
    as the server does (TestNatsBroker alone hands it to the stream's consumers only)."""

    async def publish(self, cmd: Any) -> None:
        incoming = await build_message(
            message=cmd.body,
            subject=cmd.destination,
            headers=cmd.headers,
            correlation_id=cmd.correlation_id,
            reply_to=cmd.reply_to,
            serializer=self.broker.config.fd_config._serializer,
            codec=self.codec,
            id_generator=self.broker.config.id_generator,
        )
        queues: set[str] = set()
        for handler in self.subscribers:
            stream = getattr(handler, "stream", None)
            if stream is not None and stream.name != cmd.stream:
                continue  # a JetStream consumer of another stream (or a core publish)
            if not is_subject_match_wildcard(cmd.destination, handler.subject.broker_address):
                continue
            queue = getattr(handler, "queue", None)
            if queue:
                if queue in queues:
                    continue
                queues.add(queue)
            await self._execute_handler(incoming, cmd.destination, handler)


class MemoryBroker(TestNatsBroker):
    @contextmanager
    def _patch_producer(self, broker: NatsBroker) -> Generator[None, None, None]:
        with change_producer(broker.config, _BothProducer(broker, self.brokers)):
            yield
