"""The semantic cache: successful answers to requests that are not freshness-sensitive, found
again by embedding similarity. Entries live in JetStream KV; each orchestrator keeps an
in-memory index that it fills at start and keeps current by watching the bucket.

An answer is found again only for the principal it was made for: it may carry what that
principal's history or files held, and other users are untrusted. Each principal has an index of
its own; an entry that names no principal is never served."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re

import numpy as np
import numpy.typing as npt
from pydantic import Field

from contracts import Model, RequestCompleted, RequestRouted, Source
from services.runtime.base.errors import MODEL_ERRORS
from services.runtime.base.metrics import CACHE_LOOKUPS
from services.runtime.bus.core import Bus
from services.runtime.llm import LLMClient

log = logging.getLogger("sidekick.cache")

FRESH = re.compile(
    r"\b(news|latest|current(ly)?|today|tonight|now|this (week|month|year)|recent(ly)?|"
    r"price[sd]?|stocks?|weather|forecast|score[sd]?|yesterday|tomorrow|live)\b",
    re.IGNORECASE,
)
CACHEABLE_WORKERS = frozenset({"GENERAL", "RESEARCH", "SEARCH"})
MAX_ENTRIES = 20_000


def is_fresh(text: str) -> bool:
    """Requests about news, current data or prices must not be answered from the cache."""
    return FRESH.search(text) is not None


class CacheEntry(Model):
    text: str = Field(description="The request that was answered.")
    embedding: list[float] = Field(description="Its embedding.")
    output: str = Field(description="The answer.")
    worker_type: str = Field(description="Who answered it.")
    sources: list[Source] = Field(default_factory=list, description="Sources of the answer.")
    principal: str = Field(default="", description="Whom it was made for; only they get it.")

    def answer(self, req: RequestRouted) -> RequestCompleted:
        """This entry as the end of `req` (answered from the cache)."""
        return RequestCompleted.model_validate(
            {
                "request_id": req.request_id,
                "session_id": req.session_id,
                "status": "completed",
                "output": self.output,
                "route": "cached",
                "worker_type": self.worker_type,  # a kind name, checked by the model
                "sources": self.sources,
            }
        )


def _unit(v: list[float]) -> npt.NDArray[np.float32]:
    arr = np.asarray(v, dtype=np.float32)
    norm = float(np.linalg.norm(arr)) or 1.0
    return arr / norm


class VectorIndex:
    """Unit vectors as rows of one matrix, so a lookup is a single matrix-vector product
    (a few milliseconds for thousands of answers) instead of a Python loop on the event loop."""

    def __init__(self) -> None:
        self.rows: dict[str, int] = {}
        self.entries: list[CacheEntry | None] = []
        self.matrix = np.zeros((0, 0), dtype=np.float32)

    def __len__(self) -> int:
        return len(self.rows)

    def put(self, key: str, entry: CacheEntry) -> None:
        unit = _unit(entry.embedding)
        if self.matrix.shape[1] not in (0, unit.shape[0]):
            return  # another embedding model's vector: not comparable
        if self.matrix.shape[1] == 0:
            self.matrix = np.zeros((64, unit.shape[0]), dtype=np.float32)
        row = self.rows.get(key)
        if row is None:
            row = len(self.entries)
            if row == self.matrix.shape[0]:
                grown = np.zeros((row * 2, self.matrix.shape[1]), dtype=np.float32)
                grown[:row] = self.matrix
                self.matrix = grown
            self.rows[key] = row
            self.entries.append(entry)
        self.matrix[row] = unit
        self.entries[row] = entry

    def remove(self, key: str) -> None:
        row = self.rows.pop(key, None)
        if row is not None:
            self.matrix[row] = 0.0  # a zero row never matches
            self.entries[row] = None

    def best(self, vector: list[float]) -> tuple[float, CacheEntry] | None:
        if not self.rows:
            return None
        query = _unit(vector)
        if query.shape[0] != self.matrix.shape[1]:
            return None
        scores = self.matrix[: len(self.entries)] @ query
        row = int(np.argmax(scores))
        entry = self.entries[row]
        return (float(scores[row]), entry) if entry is not None else None


class SemanticCache:
    def __init__(self, bus: Bus, embedder: LLMClient, threshold: float) -> None:
        self.bus = bus
        self.embedder = embedder
        self.threshold = threshold
        self.indexes: dict[str, VectorIndex] = {}
        self.owners: dict[str, str] = {}  # entry key -> principal, to remove it from its index
        # Embeddings computed at lookup, kept until the request ends so storing needs no call.
        self.pending: dict[str, list[float]] = {}
        self._watch: asyncio.Task[None] | None = None

    @property
    def enabled(self) -> bool:
        return self.embedder.configured

    async def start(self) -> None:
        if not self.enabled:
            log.info("semantic cache is off: no embeddings endpoint is configured")
            return
        self._watch = asyncio.create_task(self._follow())

    async def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch

    async def _follow(self) -> None:
        """Load every entry, then apply updates as other replicas store answers."""
        while True:
            try:
                watcher = await self.bus.kv.cache.watchall()
                async for entry in watcher:
                    if entry is None or entry.value is None:
                        continue
                    if not entry.value:
                        self._remove(entry.key)
                        continue
                    with contextlib.suppress(ValueError):
                        self._put(entry.key, CacheEntry.model_validate_json(entry.value))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # reconnects, server restarts
                log.warning("cache watch interrupted (%r); resuming", exc)
                await asyncio.sleep(1)

    def _put(self, key: str, entry: CacheEntry) -> None:
        if not entry.principal or (key not in self.owners and len(self.owners) >= MAX_ENTRIES):
            return
        self.owners[key] = entry.principal
        self.indexes.setdefault(entry.principal, VectorIndex()).put(key, entry)

    def _remove(self, key: str) -> None:
        principal = self.owners.pop(key, None)
        if principal is not None:
            self.indexes[principal].remove(key)

    async def lookup(self, key: str, text: str, *, principal: str, skip: bool) -> CacheEntry | None:
        if not self.enabled or skip or is_fresh(text):
            CACHE_LOOKUPS.labels("skipped").inc()
            return None
        try:
            (vector,) = await self.embedder.embed([text])
        except MODEL_ERRORS as exc:
            log.warning("cache lookup skipped: %s", exc)
            CACHE_LOOKUPS.labels("error").inc()
            return None
        if len(self.pending) > MAX_ENTRIES:
            self.pending.clear()
        self.pending[key] = vector
        index = self.indexes.get(principal)
        best = index.best(vector) if index is not None else None
        if best is not None and best[0] >= self.threshold:
            CACHE_LOOKUPS.labels("hit").inc()
            return best[1]
        CACHE_LOOKUPS.labels("miss").inc()
        return None

    async def store(
        self,
        key: str,
        text: str,
        output: str,
        worker_type: str,
        sources: list[Source],
        *,
        principal: str,
    ) -> None:
        vector = self.pending.pop(key, None)
        if not self.enabled or is_fresh(text) or worker_type not in CACHEABLE_WORKERS:
            return
        if vector is None:  # another replica looked it up
            try:
                (vector,) = await self.embedder.embed([text])
            except MODEL_ERRORS as exc:
                log.warning("answer not cached: %s", exc)
                return
        entry = CacheEntry(
            text=text,
            embedding=vector,
            output=output,
            worker_type=worker_type,
            sources=sources,
            principal=principal,
        )
        await self.bus.kv.cache.put(key, entry.model_dump_json().encode())
        self._put(key, entry)
