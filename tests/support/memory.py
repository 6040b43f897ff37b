"""The fast tier's stand-in for NATS, in memory: a JetStream KV bucket with the same revision
semantics as the server's (compare-and-set on the last revision, create-if-absent, filtered
watches). The same test bodies run against the real nats-server through the `kv` fixture's
"nats" side (tests/conftest.py), which is what keeps this one honest.

    MemoryKV      one bucket: get / put / create / update / delete / keys / watch
    MemoryStore   the buckets of one test
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import nats.js.errors


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
