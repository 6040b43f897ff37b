"""Holds on live services: six requests of one principal race for the last of its day.

Every orchestrated fake model call here reports a 1,500-token prompt and a reply of its full
`max_tokens` (500), so a request (decision, attempt, verdict) spends 6,000 tokens, and six of
them would spend 36,000 of a 15,000-token day if each only checked the day before its calls. The
frontline's routing call reports its prompt as the frontline estimates it, and its full
`max_tokens`: what it holds; it is counted at the handoff. What holds
promise (services/runtime/budgets/holds.py): each step is sent only once its maximum is held,
with the day's spend and every live hold within the limit; so, as no call here uses more than it
held, the day's count never passes 15,000, each request (and each routing call) is counted
exactly once, no hold is left when they have ended, and a request refused ends saying it stopped
at its daily tokens budget (or, once the day is spent or held, is refused at the gateway)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from nats.aio.client import Client as NATS

from tests.support.budgets import as_estimated, day_of
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.gateway_client import AuthClient
from tests.support.harness import Conversation, System
from tests.support.systems import Systems

DAY = 15_000
REPLY = "500"  # max_tokens of every reply
WORDS = ("tides", "moon", "harbour", "lighthouse", "ferries", "dunes")


@pytest.fixture(scope="module")
def race(systems: Systems) -> Iterator[System]:
    yield from systems.run(
        workers="GENERAL",
        auth=True,
        SIDEKICK_LLM_MAX_TOKENS_SHORT=REPLY,
        SIDEKICK_LLM_MAX_TOKENS_ANSWER=REPLY,
        SIDEKICK_BUDGET_DAILY_TOKENS=str(DAY),
    )


async def one_request(system: System, word: str) -> Conversation | dict[str, Any]:
    """The request's frames to its end, or the gateway's refusal."""
    async with AuthClient(system.ws_url, "dora", events=True) as dora:
        await dora.send({"uuid": dora.uuid, "message": f"search the {word}"})
        frames = await dora.frames_until(lambda f: f.get("event") == "ack" or "error" in f)
        if "error" in frames[-1]:
            return dict(frames[-1]["error"])
        return await dora.until_end_of(str(frames[-1]["request_id"]))


def tokens_of(convo: Conversation) -> int:
    """The orchestrated part of the request's usage (its end also shows the routing call)."""
    models = convo.end["metadata"]["usage"]["models"]
    return sum(
        int(u["input_tokens"]) + int(u["output_tokens"])
        for name, u in models.items()
        if name != "fake-frontline"
    )


async def test_six_requests_racing_for_the_last_of_a_day_never_spend_past_it(
    race: System, fake_llm: FakeOpenAI, nc: NATS
) -> None:
    fake_llm.usage_of = lambda body: (
        as_estimated(body) if body["model"] == "fake-frontline" else (1500, int(body["max_tokens"]))
    )
    outcomes = await asyncio.gather(*(one_request(race, w) for w in WORDS))
    ended = [o for o in outcomes if isinstance(o, Conversation)]
    at_gateway = [o for o in outcomes if isinstance(o, dict)]
    completed = [c for c in ended if c.end["status"] == "completed"]
    stopped = [c for c in ended if c.end["status"] != "completed"]

    day = await day_of(nc, race, "dora")
    spent = day.input_tokens + day.output_tokens
    assert spent <= DAY, (spent, [c.end["status"] for c in ended])
    # Every model call the requests made (each orchestrated one reports 2,000 tokens) is
    # counted, once.
    calls = sum(
        len(fake_llm.chat_calls(f"fake-{r}")) for r in ("orchestrator", "worker", "evaluator")
    )
    routing = [sum(as_estimated(body)) for body in fake_llm.chat_calls("fake-frontline")]
    assert (day.calls, spent) == (calls + len(routing), 2000 * calls + sum(routing))
    assert sum(tokens_of(c) for c in completed) == 6000 * len(completed)
    # A request the frontline refused made no call and counted nothing; every other one was
    # counted twice: its routing call at the handoff, and the rest at its end.
    assert len(day.counted) == 2 * len(routing) and len(routing) <= len(ended)
    assert day.held == {}  # every hold settled when its request ended
    assert completed, "the day holds at least one whole request"
    assert stopped or at_gateway, "six whole requests cannot fit in the day"
    for convo in stopped:
        said = convo.text + " ".join(e["message"] for e in convo.errors)
        assert "stopped at its daily tokens budget" in said, said
        assert "used or held, and its next model call could take" in said, said
    for refusal in at_gateway:
        assert refusal["code"] == "rate_limited"
        assert (
            "Today's budget for dora is spent or held by requests in flight" in (refusal["message"])
        )
