"""Reading a live system's `budgets` bucket, as the budget tests check it: a principal's day, one
of its sessions, and a call's usage as the frontline's hold counts it; a race of direct answers
for the last of a day (each request to its end or its refusal); a request held while its
evaluation is made; and a request as the budget seam reads it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from nats.aio.client import Client as NATS
from nats.js.kv import KeyValue

from contracts import Subjects
from services.runtime.budgets.accounts import Day, day_key, session_key
from services.runtime.budgets.asks import prompt_estimate
from tests.support.fakes.openai_server import FakeOpenAI, Reply
from tests.support.gateway_client import AuthClient
from tests.support.harness import Conversation, System
from tests.support.scripts import evaluator_held
from tests.support.waits import wait_for


@dataclass(frozen=True)
class Req:
    """A request as the budget seam reads it (`Budget.step`), for the seam's own tests."""

    request_id: str
    principal: str = "pat"
    session_id: str = "pat/s1"
    ts: datetime = field(default_factory=lambda: datetime.now(UTC))


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


async def ended_or_refused(
    client: AuthClient, refused: list[dict[str, Any]]
) -> Conversation | None:
    """The message `client` just sent, to its end; None when the gateway refused it at once.
    Its refusal (at once, or a failed end) is added to `refused`."""
    frames = await client.frames_until(lambda f: f.get("event") == "ack" or "error" in f)
    if "error" in frames[-1]:
        refused.append(frames[-1]["error"])
        return None
    convo = await client.until_end_of(str(frames[-1]["request_id"]))
    if convo.end["status"] == "failed":
        refused.append(convo.errors[-1])
    return convo


@asynccontextmanager
async def judging(
    system: System, fake_llm: FakeOpenAI, principal: str, text: str
) -> AsyncIterator[tuple[AuthClient, str, threading.Event]]:
    """`principal`'s socket (events on), on which it sent `text`, once the request's evaluation
    is being made, every verdict held (`evaluator_held`): (the client, the request id, the hold;
    set it and the verdict comes, as leaving the block does)."""
    with evaluator_held(fake_llm) as hold:
        async with AuthClient(system.ws_url, principal, events=True) as client:
            request_id = await client.ack(text)
            await wait_for(lambda: len(fake_llm.chat_calls("fake-evaluator")) == 1)
            yield client, request_id, hold


@dataclass
class Race:
    """`hello_race`'s outcome so far: the race (each request's conversation, or None when the
    gateway refused it), the refusals, and the gate every model call waits on."""

    racing: asyncio.Future[list[Conversation | None]]
    refused: list[dict[str, Any]]
    gate: threading.Event

    async def ended(self) -> list[Conversation]:
        """The requests that ran, once the gate is open."""
        return [c for c in await self.racing if c is not None]


async def hello_race(
    system: System, fake_llm: FakeOpenAI, principal: str, racers: int, timeout: float
) -> Race:
    """`racers` direct answers of `principal` sent at once, each call using exactly what it
    held (`as_estimated`) and waiting on the gate, so that all race while their holds stand;
    returned once each has its call or its refusal, the gate still shut (set on a failure)."""
    gate = threading.Event()
    fake_llm.script("fake-frontline", lambda body: Reply("Hello there.", wait=gate))
    fake_llm.usage_of = as_estimated
    refused: list[dict[str, Any]] = []

    async def one(n: int) -> Conversation | None:
        async with AuthClient(system.ws_url, principal, events=True) as client:
            await client.send({"uuid": client.uuid, "message": f"hello number {n}"})
            return await ended_or_refused(client, refused)

    race = Race(asyncio.gather(*(one(n) for n in range(racers))), refused, gate)
    try:
        await wait_for(
            lambda: len(fake_llm.chat_calls("fake-frontline")) + len(refused) == racers,
            timeout=timeout,
        )
    except BaseException:
        gate.set()
        raise
    return race
