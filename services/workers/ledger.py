"""An idempotency ledger for side effects (email, notifications) in the KV bucket `ledger`.

Before acting, a worker claims the effect's key with a create-if-absent write; only the one that
created the key acts, and it records the outcome after. A duplicate delivery finds the key and
replays the recorded outcome instead of acting again. If it finds the effect still `started`, it
waits for the outcome; a claim that stays `started` past `stale_after` belongs to a worker that
died mid-action, so whether the effect happened is unknown, and it is not repeated: at most once.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Literal

import nats.js.errors
from nats.js.kv import KeyValue
from pydantic import AwareDatetime, Field

from contracts import Model, utcnow
from services.runtime.bus.kvstore import get_model, key_for

EffectState = Literal["started", "succeeded", "failed", "unknown"]
POLL_SECONDS = 0.1


class Effect(Model):
    """One side effect's record."""

    state: EffectState = Field(description="Where the effect is.")
    started_at: AwareDatetime = Field(default_factory=utcnow, description="When it was claimed.")
    finished_at: AwareDatetime | None = Field(default=None, description="When it ended.")
    output: str = Field(default="", description="What the worker reported, replayed on repeats.")
    error: str | None = Field(default=None, description="Why it failed, when it did.")
    retryable: bool = Field(default=False, description="Whether a new attempt may succeed.")


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
        try:
            await self.kv.create(key, Effect(state="started").model_dump_json().encode())
            return None
        except (nats.js.errors.KeyWrongLastSequenceError, nats.js.errors.BadRequestError):
            pass
        deadline = time.monotonic() + self.stale_after
        while True:
            effect, _ = await get_model(self.kv, key, Effect)
            if effect is None:  # deleted under us: nobody owns it now; do not guess
                return Effect(state="unknown", error="the ledger entry vanished")
            if effect.state != "started":
                return effect
            if time.monotonic() >= deadline or _age(effect.started_at) >= self.stale_after:
                return effect
            await asyncio.sleep(POLL_SECONDS)

    async def record(self, key: str, effect: Effect) -> None:
        done = effect.model_copy(update={"finished_at": utcnow()})
        await self.kv.put(key, done.model_dump_json().encode())


def _age(started: datetime) -> float:
    return (utcnow() - started).total_seconds()
