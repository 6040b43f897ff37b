"""Small, safe patterns over JetStream KV: compare-and-set updates and key encoding.

A caller that has just read or written a key knows its revision; passing that on (`known`)
lets the next compare-and-set go straight to the write, one round trip instead of two, and
fall back to reading only when someone else wrote in between.

A remembered copy is only good for a write: the compare-and-set proves it current. A decision
that writes nothing (an event that changes nothing, a duplicate, a refused move) proves
nothing, and taken on a copy another process has moved on since, it drops an event for good
(no write fails, so nothing reads again; with several replicas that is every event whose
previous step another replica handled). So `compare_and_set` takes such a decision only on a
value it has just read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

import nats.js.errors
from nats.js.kv import KeyValue
from pydantic import BaseModel

from contracts.subjects import key_token

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Versioned(Generic[M]):
    """A stored value and the revision it was read or written at."""

    value: M
    revision: int


@dataclass(frozen=True)
class Stamped(Generic[M]):
    """A stored value, its revision, and when the NATS server stored it (by the server's
    clock, which no client chooses; None when the server did not say)."""

    value: M
    revision: int
    stored_at: datetime | None


def key_for(value: str) -> str:
    """A KV-safe key for any string (session ids come from clients); a session's key is also
    its token in the `out` subjects (contracts/subjects.py)."""
    return key_token(value)


async def get_model(kv: KeyValue, key: str, model: type[M]) -> tuple[M | None, int]:
    """The stored model and its revision (0 when absent)."""
    try:
        entry = await kv.get(key)
    except nats.js.errors.KeyNotFoundError:
        return None, 0
    if entry.value is None or not entry.value:
        return None, entry.revision or 0
    return model.model_validate_json(entry.value), entry.revision or 0


async def get_stamped(kv: KeyValue, key: str, model: type[M]) -> Stamped[M] | None:
    """The stored model, its revision and the server's time of that write; None when absent.

    `KeyValue.get` drops the time the server stamps on every stored message, so this asks
    the bucket's stream for the key's last message as `get` does (the same request, so the
    same permissions). A stand-in bucket (the tests' memory KV) gives `stored_at` on its
    entries."""
    if not isinstance(kv, KeyValue):
        try:
            entry = await kv.get(key)
        except nats.js.errors.KeyNotFoundError:
            return None
        if not entry.value:
            return None
        stamp = getattr(entry, "stored_at", None)
        return Stamped(
            model.model_validate_json(entry.value),
            entry.revision or 0,
            stamp if isinstance(stamp, datetime) else None,
        )
    # nats-py keeps the bucket's stream, prefix and direct flag private; `get` uses them so.
    subject = f"{kv._pre}{key}"
    try:
        msg = await kv._js.get_msg(kv._stream, subject=subject, direct=kv._direct)
    except nats.js.errors.NotFoundError:
        return None
    deleted = (msg.headers or {}).get("KV-Operation") in ("DEL", "PURGE")
    if msg.subject != subject or deleted or not msg.data:
        return None
    return Stamped(model.model_validate_json(msg.data), msg.seq or 0, msg.time)


async def write_if(kv: KeyValue, key: str, value: BaseModel, revision: int) -> int | None:
    """Write only if the key is still at `revision` (0 = must not exist); the new revision,
    or None if the key moved meanwhile."""
    data = value.model_dump_json().encode()
    try:
        if revision == 0:
            return int(await kv.create(key, data))
        return int(await kv.update(key, data, last=revision))
    except (nats.js.errors.KeyWrongLastSequenceError, nats.js.errors.BadRequestError):
        return None


async def mutate(
    kv: KeyValue,
    key: str,
    model: type[M],
    change: Callable[[M | None], M | None],
    *,
    attempts: int = 20,
) -> M | None:
    """Read-modify-write with optimistic concurrency. `change` returns None to leave as is."""
    done = await mutate_versioned(kv, key, model, change, attempts=attempts)
    return done.value if done is not None else None


async def mutate_versioned(
    kv: KeyValue,
    key: str,
    model: type[M],
    change: Callable[[M | None], M | None],
    *,
    known: Versioned[M] | None = None,
    attempts: int = 20,
) -> Versioned[M] | None:
    """`mutate`, starting from `known` when given, returning the value with its revision."""

    def decide(current: Versioned[M] | None) -> M | None:
        return change(current.value if current is not None else None)

    return await compare_and_set(kv, key, model, decide, known=known, attempts=attempts)


async def compare_and_set(
    kv: KeyValue,
    key: str,
    model: type[M],
    decide: Callable[[Versioned[M] | None], M | None],
    *,
    known: Versioned[M] | None = None,
    attempts: int = 20,
) -> Versioned[M] | None:
    """Write `decide(current)` if the key is still where `current` was read; None from
    `decide` leaves it as is (and returns what is there, or None when absent). Tried first on
    `known`, which saves a read when it is current; but a decision that writes nothing, or
    raises, is taken again on a fresh read before it stands (the module's docstring says why).
    A failed write reads again and decides again."""
    for _ in range(attempts):
        fresh = known is None
        current: Versioned[M] | None
        if known is not None:
            current, revision, known = known, known.revision, None
        else:
            value, revision = await get_model(kv, key, model)
            current = Versioned(value, revision) if value is not None else None
        try:
            updated = decide(current)
        except Exception:
            if fresh:
                raise
            continue  # refused on a remembered copy: read, and ask again
        if updated is None:
            if fresh:
                return current
            continue  # nothing to do on a remembered copy: read, and ask again
        written = await write_if(kv, key, updated, revision)
        if written is not None:
            return Versioned(updated, written)
    raise RuntimeError(f"could not update {key} after {attempts} tries (contention)")
