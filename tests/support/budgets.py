"""Reading a live system's `budgets` bucket, as the budget tests check it: a principal's day, one
of its sessions, and a call's usage as the frontline's hold counts it."""

from __future__ import annotations

from typing import Any

from nats.aio.client import Client as NATS
from nats.js.kv import KeyValue

from contracts import Subjects
from services.runtime.budgets.accounts import Day, day_key, session_key
from services.runtime.budgets.asks import prompt_estimate
from tests.support.harness import System


async def bucket(nc: NATS, system: System) -> KeyValue:
    return await nc.jetstream().key_value(Subjects(system.namespace).bucket("budgets"))


async def day_of(nc: NATS, system: System, principal: str) -> Day:
    entry = await (await bucket(nc, system)).get(day_key(principal))
    return Day.model_validate_json(entry.value or b"")


async def session_of(nc: NATS, system: System, principal: str, uuid: str) -> Day:
    entry = await (await bucket(nc, system)).get(session_key(principal, f"{principal}/{uuid}"))
    return Day.model_validate_json(entry.value or b"")


def as_estimated(body: dict[str, Any]) -> tuple[int, int]:
    """A call's usage as the frontline's hold counts it: the prompt estimated, the reply full."""
    return prompt_estimate(body["messages"], body.get("tools")), int(body["max_tokens"])
