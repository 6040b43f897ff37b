"""A structured reply's repair call is a model call like any other: the LLM client checks the
request's budget before it. The email worker's draft comes back invalid once, so the client
would ask again; with one model call left to the request that repair is never sent and the
request fails naming the limit. Its step holds two calls' maximum where that fits, so with room
left a repair is made even when its prompt (the long invalid reply, sent back) is longer than
one call's hold. The orchestrator's decision is checked the same way, and the call it made is
counted in the principal's day. Without a SendGrid key the email goes to the outbox, marked NOT
SENT. Every fake model call reports 11 tokens in and 7 out."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from nats.aio.client import Client as NATS

from contracts import Subjects
from services.runtime.budgets.accounts import Day, day_key
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.gateway_client import AuthClient
from tests.support.harness import System
from tests.support.scripts import decide, invalid_once
from tests.support.systems import Systems
from tests.support.workers_support import every_kind

DRAFT = {"subject": "The plan", "body": "Hi Cy, it is on."}


@pytest.fixture(scope="module")
def two_calls(systems: Systems) -> Iterator[System]:
    # The decision and the draft: nothing left for a repair.
    yield from every_kind(systems, SIDEKICK_BUDGET_REQUEST_CALLS="2")


@pytest.fixture(scope="module")
def one_call(systems: Systems) -> Iterator[System]:
    # The decision, and nothing more.
    yield from every_kind(systems, auth=True, SIDEKICK_BUDGET_REQUEST_CALLS="1")


@pytest.fixture(scope="module")
def roomy(systems: Systems) -> Iterator[System]:
    yield from every_kind(systems)


def email_cy(fake_llm: FakeOpenAI, bad: str) -> None:
    fake_llm.script(
        "fake-orchestrator",
        decide("EMAIL", "Email Cy the plan", to="cy@example.com", body="the plan is on"),
    )
    fake_llm.script("fake-worker", invalid_once("EmailDraft", bad, DRAFT))


async def test_an_invalid_draft_is_not_repaired_when_the_budget_allows_no_more_calls(
    two_calls: System, fake_llm: FakeOpenAI
) -> None:
    email_cy(fake_llm, "not a draft")
    convo = await two_calls.ask("email cy the plan")
    assert len(fake_llm.chat_calls("fake-worker")) == 1  # the draft; its repair was not made
    assert convo.end["status"] == "failed", convo.frames
    error = convo.only_error("budget_exhausted")
    assert "model calls budget (1 of the 1 left to this request)" in error, error
    assert "NOT SENT" not in convo.text


async def test_a_long_invalid_draft_is_repaired_where_the_budget_has_room(
    roomy: System, fake_llm: FakeOpenAI
) -> None:
    # About 3,000 tokens sent back in the repair: more than one call's hold has room for.
    email_cy(fake_llm, "not a draft " * 1000)
    convo = await roomy.ask("email cy the plan")
    first, repair = fake_llm.chat_calls("fake-worker")
    assert len(repair["messages"]) == len(first["messages"]) + 2  # the bad reply, what was wrong
    assert convo.end["status"] == "completed", convo.frames
    assert convo.answer.startswith("Email NOT SENT: no SENDGRID_API_KEY is set")


async def test_an_invalid_decision_is_not_repaired_when_the_budget_allows_no_more_calls(
    one_call: System, fake_llm: FakeOpenAI, nc: NATS
) -> None:
    replies = iter(["no decision here"])
    decision = decide("GENERAL", "Search the tides")
    fake_llm.script("fake-orchestrator", lambda body: next(replies, None) or decision(body))
    async with AuthClient(one_call.ws_url, "ivan", events=True) as ivan:
        request_id = await ivan.ack("search the tides")
        done = await ivan.until_end_of(request_id)
    assert len(fake_llm.chat_calls("fake-orchestrator")) == 1  # its repair was not made
    assert fake_llm.chat_calls("fake-worker") == []
    assert done.end["status"] == "failed", done.frames
    assert "model calls budget (1 of 1)" in done.only_error("budget_exhausted")
    # The one call made is counted in the principal's day, beside the frontline's routing call
    # (counted under its own id at handoff).
    kv = await nc.jetstream().key_value(Subjects(one_call.namespace).bucket("budgets"))
    day = Day.model_validate_json((await kv.get(day_key("ivan"))).value or b"")
    counted = (day.input_tokens, day.output_tokens, day.calls, day.counted)
    assert counted == (22, 14, 2, [f"{request_id}.frontline", request_id])
