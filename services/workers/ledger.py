"""An idempotency ledger for side effects (email, notifications) in the KV bucket `ledger`.

Before acting, a worker claims the effect's key with a create-if-absent write; only the one that
created the key acts, and it records the outcome after. A duplicate delivery finds the key and
replays the recorded outcome instead of acting again. If it finds the effect still `started`, it
waits for the outcome; a claim that stays `started` past `stale_after` belongs to a worker that
died mid-action, so whether the effect happened is unknown, and it is not repeated: at most once.

A claim made while the bus is away raises an outage (the consumer retries the task), but its
write may still land once the connection is back: the NATS client sends what it buffered. That
`started` entry's owner never acted, so this process remembers the claim's token and its own
retry takes the entry over by compare-and-set instead of reading it as a send of unknown fate.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import datetime
from typing import Literal

from nats.js.kv import KeyValue
from pydantic import AwareDatetime, Field

from contracts import Model, utcnow
from services.runtime.bus.core import OUTAGE_ERRORS
from services.runtime.bus.kvstore import get_model, key_for, write_if

EffectState = Literal["started", "succeeded", "failed", "unknown"]
POLL_SECONDS = 0.1
# The tokens of this process's claims the bus never answered, by key (see the docstring); a few
# at most, dropped once taken over or when the key is claimed anew.
_UNANSWERED: dict[str, set[str]] = {}
_UNANSWERED_MAX = 1000


class Effect(Model):
    """One side effect's record."""

    state: EffectState = Field(description="Where the effect is.")
    started_at: AwareDatetime = Field(default_factory=utcnow, description="When it was claimed.")
    finished_at: AwareDatetime | None = Field(default=None, description="When it ended.")
    output: str = Field(default="", description="What the worker reported, replayed on repeats.")
    error: str | None = Field(default=None, description="Why it failed, when it did.")
    retryable: bool = Field(default=False, description="Whether a new attempt may succeed.")
    claim: str | None = Field(default=None, description="The token of the claim that started it.")


def effect_key(kind: str, request_id: str, attempt: int) -> str:
    """A KV-safe key per (kind, request, attempt); request ids come from clients."""
    return f"{kind}.{key_for(request_id)}.{attempt}"


class Ledger:
    def __init__(self, kv: KeyValue, *, stale_after: float) -> None:
        self.kv = kv
        self.stale_after = stale_after

    async def claim(self, key: str) -> Effect | None:
        """None when this caller now owns the effect and must act; otherwise the recorded
        effect (waited for while another holder is still acting)."""
        if await self._write(key, 0):
            _UNANSWERED.pop(key, None)
            return None
        deadline = time.monotonic() + self.stale_after
        while True:
            effect, revision = await get_model(self.kv, key, Effect)
            if effect is None:  # deleted under us: nobody owns it now; do not guess
                return Effect(state="unknown", error="the ledger entry vanished")
            if effect.state == "started" and effect.claim in _UNANSWERED.get(key, set()):
                if await self._write(key, revision):  # ours, never acted on: take it over
                    _UNANSWERED.pop(key, None)
                    return None
                continue
            if effect.state != "started":
                return effect
            if time.monotonic() >= deadline or _age(effect.started_at) >= self.stale_after:
                return effect
            await asyncio.sleep(POLL_SECONDS)

    async def _write(self, key: str, revision: int) -> bool:
        """Write a `started` claim if the key is still at `revision`; whether it was written.
        A write the bus did not answer is remembered as unanswered, and the outage raised."""
        token = uuid.uuid4().hex
        try:
            written = await write_if(self.kv, key, Effect(state="started", claim=token), revision)
        except OUTAGE_ERRORS:
            if len(_UNANSWERED) >= _UNANSWERED_MAX:
                _UNANSWERED.clear()  # forgetting one only makes its effect "unknown"
            _UNANSWERED.setdefault(key, set()).add(token)
            raise
        return written is not None

    async def record(self, key: str, effect: Effect) -> None:
        done = effect.model_copy(update={"finished_at": utcnow()})
        await self.kv.put(key, done.model_dump_json().encode())


def _age(started: datetime) -> float:
    return (utcnow() - started).total_seconds()
