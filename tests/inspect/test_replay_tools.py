"""A replayed TOOLS request performs no consequential tool call: a notification the original
pushed (the policy allows it) is shown in the replay as what would have been pushed, with its
arguments, and Pushover hears nothing; the timeline shows each tool call with its arguments."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.fakes.openai_server import FakeOpenAI, Reply, tool_call
from tests.support.fakes.pushover import FakePushover
from tests.support.gateway_client import AuthClient, api, token
from tests.support.harness import System, sidekick
from tests.support.scripts import decide_tools, tool_results
from tests.support.systems import Systems

MODEL = "fake-tools-replayed"


@pytest.fixture(scope="module")
def tooled(systems: Systems, pushover: FakePushover) -> Iterator[System]:
    yield from systems.run(
        tools=MODEL, keyless=True, auth=True, pushover=pushover, approvals="notify=allow"
    )


def notify_then_answer(message: str) -> Any:
    def model(body: dict[str, Any]) -> Reply:
        results = tool_results(body)
        if not results:
            return Reply(tool_calls=[tool_call("notify", {"message": message})])
        return Reply("The tool said: " + results[-1]["content"])

    return model


async def test_a_replayed_notification_is_shown_not_pushed(
    tooled: System, fake_llm: FakeOpenAI, pushover: FakePushover
) -> None:
    message = f"Your report {uuid.uuid4().hex[:6]} is ready"
    fake_llm.script("fake-orchestrator", decide_tools("notify me"))
    fake_llm.script(MODEL, notify_then_answer(message))
    async with AuthClient(tooled.ws_url, "kim", events=True) as client:
        request_id = await client.ack("Please route this: notify me")
        done = await client.until_end_of(request_id, timeout=120)
    assert done.end["status"] == "completed", done.frames
    assert pushover.sent(message) == 1

    async with api(tooled.http_url, "kim") as http:
        body = (await http.get(f"/api/requests/{request_id}/timeline")).json()
    (attempt,) = [e for e in body["entries"] if e["step"] == "attempt"]
    (call,) = attempt["tool_calls"]
    assert call["name"] == "notify" and message in call["arguments"]
    assert call["result"].startswith("Notification sent")

    env = {**os.environ, "SIDEKICK_TOKEN": token("kim")}
    ran = await asyncio.to_thread(
        sidekick,
        "replay",
        request_id,
        "--from",
        "attempt:1",
        "--url",
        tooled.http_url,
        env=env,
        timeout=180,
    )
    out = ran.stdout + ran.stderr
    assert ran.returncode == 0, out
    assert pushover.sent(message) == 1  # still the original's one
    assert "not performed" in out and "notify" in out and message in out
    new_id = out.split(" as ")[1].split()[0]
    async with api(tooled.http_url, "kim") as http:
        again = (await http.get(f"/api/requests/{new_id}/timeline")).json()
    (attempt,) = [e for e in again["entries"] if e["step"] == "attempt"]
    (call,) = attempt["tool_calls"]
    assert call["result"].startswith("REPLAY: not performed")
    assert message in call["result"]
