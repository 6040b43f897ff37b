"""Small, safe patterns over JetStream KV: compare-and-set updates and key encoding."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TypeVar

import nats.js.errors
from nats.js.kv import KeyValue
from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


def key_for(value: str) -> str:
    """A KV-safe key for any string (session ids come from clients)."""
    return hashlib.sha256(value.encode()).hexdigest()[:40]


async def get_model(kv: KeyValue, key: str, model: type[M]) -> tuple[M | None, int]:
    """The stored model and its revision (0 when absent)."""
    try:
        entry = await kv.get(key)
    except nats.js.errors.KeyNotFoundError:
        return None, 0
    if entry.value is None or not entry.value:
        return None, entry.revision or 0
    return model.model_validate_json(entry.value), entry.revision or 0


async def put_if(kv: KeyValue, key: str, value: BaseModel, revision: int) -> bool:
    """Write only if the key is still at `revision` (0 = must not exist). False if it moved."""
    data = value.model_dump_json().encode()
    try:
        if revision == 0:
            await kv.create(key, data)
        else:
            await kv.update(key, data, last=revision)
    except (nats.js.errors.KeyWrongLastSequenceError, nats.js.errors.BadRequestError):
        return False
    return True


async def mutate(
    kv: KeyValue,
    key: str,
    model: type[M],
    change: Callable[[M | None], M | None],
    *,
    attempts: int = 20,
) -> M | None:
    """Read-modify-write with optimistic concurrency. `change` returns None to leave as is."""
    for _ in range(attempts):
        current, revision = await get_model(kv, key, model)
        updated = change(current)
        if updated is None:
            return current
        if await put_if(kv, key, updated, revision):
            return updated
    raise RuntimeError(f"could not update {key} after {attempts} tries (contention)")
