"""notify against a fake Pushover, with its idempotency ledger in a JetStream KV bucket, in memory
and on the real server."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from services.workers.tools.notify import Notifier, ledger_key
from services.workers.tools.toolbox import Call, RunContext, ToolBox
from tests.support.fakes.pushover import FakePushover


@pytest.fixture
def ledger(kv: Any) -> Any:
    """The ledger's bucket: the `kv` fixture's, in memory and on the real server."""
    return kv


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=5) as client:
        yield client


def box(http: httpx.AsyncClient, ledger: Any, pushover: FakePushover, **keys: str) -> ToolBox:
    notifier = Notifier(
        http,
        lambda: ledger,
        token=keys.get("token", pushover.token),
        user=keys.get("user", pushover.user),
        base_url=pushover.url,
    )
    return ToolBox(notifier.tools(), result_chars=2000, call_timeout=10)


async def test_the_same_call_id_is_pushed_once_and_a_new_message_again(
    http: httpx.AsyncClient, ledger: Any, pushover: FakePushover
) -> None:
    tools = box(http, ledger, pushover)
    run = RunContext(request_id=uuid.uuid4().hex, session_id="s", attempt=1)
    args = json.dumps({"message": "the build is green", "title": "CI"})
    first = await tools.call("notify", args, Call(run, "call_a"))
    again = await tools.call("notify", args, Call(run, "call_a"))
    other = await tools.call("notify", json.dumps({"message": "deployed"}), Call(run, "call_b"))
    assert first.ok and first.content.startswith("Notification sent (Pushover request ")
    assert again.ok and again.content.startswith("Notification already sent for this call")
    assert other.ok and other.content.startswith("Notification sent")
    mine = [m for m in pushover.messages if m["message"] in ("the build is green", "deployed")]
    assert [(m["message"], m.get("title")) for m in mine] == [
        ("the build is green", "CI"),
        ("deployed", None),
    ]
    entry = await ledger.get(ledger_key(run.request_id, 1, "call_a"))
    assert json.loads(entry.value or b"{}")["state"] == "sent"


async def test_without_keys_notify_names_the_variables_and_sends_nothing(
    http: httpx.AsyncClient, ledger: Any, pushover: FakePushover
) -> None:
    before = len(pushover.requests)
    tools = box(http, ledger, pushover, token="", user="")
    run = RunContext(request_id="r", session_id="s", attempt=1)
    outcome = await tools.call("notify", json.dumps({"message": "hi"}), Call(run, "c"))
    assert not outcome.ok
    assert "PUSHOVER_TOKEN" in outcome.content and "PUSHOVER_USER" in outcome.content
    assert len(pushover.requests) == before


async def test_a_refused_notification_is_reported_and_not_retried_for_the_same_call(
    http: httpx.AsyncClient, ledger: Any, pushover: FakePushover
) -> None:
    tools = box(http, ledger, pushover, user="not-a-user")
    run = RunContext(request_id=uuid.uuid4().hex, session_id="s", attempt=1)
    args = json.dumps({"message": "refused one"})
    first = await tools.call("notify", args, Call(run, "call_x"))
    assert not first.ok and "Pushover refused the notification" in first.content
    assert "user identifier is not a valid user" in first.content
    posts = len(pushover.calls("/1/messages.json"))
    second = await tools.call("notify", args, Call(run, "call_x"))
    assert not second.ok and "already failed" in second.content
    assert len(pushover.calls("/1/messages.json")) == posts


async def test_a_rerun_that_gives_the_same_message_a_new_call_id_does_not_push_it_again(
    http: httpx.AsyncClient, ledger: Any, pushover: FakePushover
) -> None:
    tools = box(http, ledger, pushover)
    request = uuid.uuid4().hex
    message = json.dumps({"message": f"report {request[:6]} ready"})
    run = RunContext(request_id=request, session_id="s", attempt=1)
    first = await tools.call("notify", message, Call(run, "call_first_run"))
    rerun = await tools.call("notify", message, Call(run, "call_second_run"))
    assert first.ok and first.content.startswith("Notification sent")
    assert rerun.ok and "already sent in this attempt" in rerun.content
    next_attempt = RunContext(request_id=request, session_id="s", attempt=2)
    assert (await tools.call("notify", message, Call(next_attempt, "call_2"))).ok
    assert len([m for m in pushover.messages if m["message"] == f"report {request[:6]} ready"]) == 2
