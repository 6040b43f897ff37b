"""Without provider keys: search and research say so honestly, and email goes to the local
outbox, marked NOT SENT, where `GET /api/outbox` and `sidekick outbox` show it."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.harness import Client, System, sidekick
from tests.support.scripts import by_schema, decide
from tests.support.systems import Systems
from tests.support.workers_support import every_kind


@pytest.fixture(scope="module")
def keyless(systems: Systems) -> Iterator[System]:
    yield from every_kind(systems)


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.load(resp)


async def test_search_without_a_brave_key_is_an_honest_error(
    keyless: System, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script("fake-orchestrator", decide("SEARCH", "Find x", query="x"))
    convo = await keyless.ask("search for x")
    error = convo.only_error("worker_failed")
    assert "Web search is not configured: set BRAVE_SEARCH_API_KEY" in error
    assert convo.end["status"] == "failed"
    assert fake_llm.chat_calls("fake-worker") == []  # no answer was made up


async def test_research_without_a_brave_key_is_an_honest_error(
    keyless: System, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script("fake-orchestrator", decide("RESEARCH", "Research y"))
    async with Client(keyless.ws_url) as client:
        convo = await client.ask("research y for me")
    assert "BRAVE_SEARCH_API_KEY" in convo.text  # an old client reads the error as text
    assert fake_llm.chat_calls("fake-worker") == []


async def test_email_without_a_sendgrid_key_is_kept_in_the_outbox_marked_not_sent(
    keyless: System, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script(
        "fake-orchestrator",
        decide("EMAIL", "Email Cy the plan", to="cy@example.com", body="the plan is on"),
    )
    fake_llm.script(
        "fake-worker",
        by_schema({"EmailDraft": lambda body: {"subject": "The plan", "body": "Hi Cy, it is on."}}),
    )
    async with Client(keyless.ws_url, events=True) as client:
        convo = await client.ask("email cy the plan")
        session = client.uuid
    assert convo.end["status"] == "completed"
    assert convo.answer.startswith("Email NOT SENT: no SENDGRID_API_KEY is set")
    assert "To: cy@example.com" in convo.text

    listing = get_json(f"{keyless.http_url}/api/outbox?session={session}")
    assert "NOT sent" in listing["note"]
    (entry,) = listing["entries"]
    assert entry["sent"] is False and entry["status"] == "not_sent"
    assert entry["to"] == ["cy@example.com"]
    assert entry["subject"] == "The plan" and entry["body"] == "Hi Cy, it is on."
    assert entry["request_id"] == convo.end["request_id"]

    shown_run = await asyncio.to_thread(
        sidekick, "outbox", "--url", keyless.http_url, timeout=60, check=True
    )
    shown = shown_run.stdout
    assert "NOT SENT" in shown and "Subject: The plan" in shown and "cy@example.com" in shown
    env = {"PATH": "/usr/bin:/bin", "SIDEKICK_NAMESPACE": keyless.namespace}
    direct_run = await asyncio.to_thread(
        sidekick,
        "outbox",
        "--json",
        "--nats-url",
        keyless.nats_url,
        env=env,
        timeout=60,
        check=True,
    )
    assert [e["request_id"] for e in json.loads(direct_run.stdout)] == [entry["request_id"]]
