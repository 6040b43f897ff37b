"""The semantic cache: successful answers to requests that are not freshness-sensitive, found
again by embedding similarity. Entries live in JetStream KV; each orchestrator keeps an
in-memory index that it fills at start and keeps current by watching the bucket."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import re

from pydantic import Field

from contracts import Model, Source
from services.runtime.bus import Bus
from services.runtime.errors import MODEL_ERRORS
from services.runtime.llm import LLMClient
from services.runtime.metrics import CACHE_LOOKUPS

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


def _unit(v: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / norm for x in v]


class SemanticCache:
    def __init__(self, bus: Bus, embedder: LLMClient, threshold: float) -> None:
        self.bus = bus
        self.embedder = embedder
        self.threshold = threshold
        self.index: dict[str, tuple[list[float], CacheEntry]] = {}
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
                        self.index.pop(entry.key, None)
                        continue
                    with contextlib.suppress(ValueError):
                        item = CacheEntry.model_validate_json(entry.value)
                        if len(self.index) < MAX_ENTRIES:
                            self.index[entry.key] = (_unit(item.embedding), item)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # reconnects, server restarts
                log.warning("cache watch interrupted (%r); resuming", exc)
                await asyncio.sleep(1)

    async def lookup(self, key: str, text: str, *, skip: bool) -> CacheEntry | None:
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
        query = _unit(vector)
        best: tuple[float, CacheEntry] | None = None
        for unit, entry in self.index.values():
            if len(unit) != len(query):
                continue
            score = sum(a * b for a, b in zip(unit, query, strict=True))
            if best is None or score > best[0]:
                best = (score, entry)
        if best is not None and best[0] >= self.threshold:
            CACHE_LOOKUPS.labels("hit").inc()
            return best[1]
        CACHE_LOOKUPS.labels("miss").inc()
        return None

    async def store(
        self, key: str, text: str, output: str, worker_type: str, sources: list[Source]
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
            text=text, embedding=vector, output=output, worker_type=worker_type, sources=sources
        )
        await self.bus.kv.cache.put(key, entry.model_dump_json().encode())
        self.index[key] = (_unit(vector), entry)
