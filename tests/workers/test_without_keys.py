"""Without provider keys: search and research say so honestly, and email goes to the local
outbox, marked NOT SENT, where `GET /api/outbox` and `sidekick outbox` show it."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.runtime.bus.natsserver import NatsServer
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.harness import ROOT, Client, System
from tests.support.workers_support import by_schema, decide, start_system


@pytest.fixture(scope="module")
def keyless(nats_server: NatsServer, fake_llm: FakeOpenAI, logs_dir: Path) -> Iterator[System]:
    with start_system(nats_server.url, fake_llm, logs_dir) as sys_:
        yield sys_


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
        subprocess.run,
        [sys.executable, "-m", "services.cli", "outbox", "--url", keyless.http_url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    shown = shown_run.stdout
    assert "NOT SENT" in shown and "Subject: The plan" in shown and "cy@example.com" in shown
    direct_run = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "services.cli", "outbox", "--json", "--nats-url", keyless.nats_url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={"PATH": "/usr/bin:/bin", "SIDEKICK_NAMESPACE": keyless.namespace},
    )
    assert [e["request_id"] for e in json.loads(direct_run.stdout)] == [entry["request_id"]]
