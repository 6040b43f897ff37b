"""What one process learns about a model endpoint, shared with the others: the structured-output
mode its server takes and whether it reports usage (services/runtime/llm/modes.py), one entry of
the `endpoints` bucket per base URL + model, living a day (services/runtime/bus/topology.py).

A service reads the entries of its roles' endpoints when it starts, so it does not pay again the
refused calls another process (or `sidekick doctor`) already paid; whatever it learns later it
writes there. Sharing is best effort: an unreadable entry or a failed write is one log line (an
INFO line when the bus is away, which the bus's own warning already says), and the process goes
on learning for itself."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime

from nats.js.kv import KeyValue
from pydantic import BaseModel, Field

from services.runtime.base.settings import ROLES, Settings, StructuredMode
from services.runtime.bus.core import OUTAGE_ERRORS
from services.runtime.bus.kvstore import key_for
from services.runtime.llm.modes import MODES, Key

log = logging.getLogger("sidekick.llm")
BUCKET = "endpoints"


class EndpointFacts(BaseModel):
    """One endpoint's entry."""

    base_url: str
    model: str
    mode: StructuredMode | None = Field(default=None, description="None: none refused yet.")
    usage_reported: bool | None = Field(default=None, description="None: not seen yet.")
    learned_by: str = ""
    learned_at: str = ""


def entry_key(key: Key) -> str:
    return key_for(f"{key[0]} {key[1]}")


def keys_of(settings: Settings) -> set[Key]:
    out: set[Key] = set()
    for role in ROLES:
        config = settings.llm(role)
        for c in (config, config.fallback):
            if c is not None and c.configured and role != "embeddings":
                out.add((c.base_url or "https://api.openai.com/v1", c.model))
    return out


async def write(kv: KeyValue, key: Key, by: str) -> None:
    mode, usage = MODES.facts(key)
    facts = EndpointFacts(
        base_url=key[0],
        model=key[1],
        mode=mode,
        usage_reported=usage,
        learned_by=by,
        learned_at=datetime.now(UTC).isoformat(),
    )
    await kv.put(entry_key(key), facts.model_dump_json().encode())


async def read(kv: KeyValue, key: Key) -> EndpointFacts | None:
    try:
        entry = await kv.get(entry_key(key))
    except Exception:  # nats.js.errors.KeyNotFoundError and its kin: nothing learned yet
        return None
    if entry.value is None:
        return None
    return EndpointFacts.model_validate_json(entry.value)


async def share(kv: KeyValue, settings: Settings, by: str) -> None:
    """Learn what the bucket holds for this process's endpoints, and write there what this
    process learns from now on."""
    for key in keys_of(settings):
        try:
            facts = await read(kv, key)
        except ValueError as exc:
            log.warning("endpoints: unreadable entry for %s at %s (%s)", key[1], key[0], exc)
            continue
        if facts is not None:
            MODES.learn(key, facts.mode, facts.usage_reported)
    tasks: set[asyncio.Task[None]] = set()

    async def put(key: Key) -> None:
        try:
            await write(kv, key, by)
        except OUTAGE_ERRORS as exc:  # the outage is the bus's line to say; this is its echo
            log.info("endpoints: not shared while the bus is away: %s (%r)", key[1], exc)
        except Exception as exc:
            log.warning("endpoints: could not share what was learned about %s (%r)", key[1], exc)

    def learned(key: Key) -> None:
        task = asyncio.get_running_loop().create_task(put(key))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    MODES.listeners.append(learned)
