"""The official JavaScript client, @a2a-js/sdk 1.3.0, driven as its README shows
(tests/protocols/a2a_js/flows.mjs, run with Node) against the real system: a second task in a
context whose first waits for input, a data-only message, ListTasks paging, and push
notifications, with a webhook on a private address refused. `scripts/test` installs the package
(`npm ci` in tests/protocols/a2a_js); Node and the package missing fail, never skip."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.fakes.webhook import HOOK, Webhook
from tests.support.gateway_client import token
from tests.support.harness import System
from tests.support.scripts import verdict

HERE = Path(__file__).parent / "a2a_js"
COMPLETED, INPUT_REQUIRED = 3, 6


async def flow(system: System, name: str, *extra: str) -> dict[str, Any]:
    node = shutil.which("node")
    assert node, "Node.js is needed for the @a2a-js/sdk tests (Node 20)"
    assert (HERE / "node_modules" / "@a2a-js" / "sdk").is_dir(), (
        f"run `npm ci` in {HERE} (scripts/test does)"
    )
    proc = await asyncio.create_subprocess_exec(
        node,
        "flows.mjs",
        name,
        system.http_url,
        token("max"),
        *extra,
        cwd=HERE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(120):
        out, err = await proc.communicate()
    seen: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    assert proc.returncode == 0, (seen, err.decode()[-2000:])
    return seen


async def test_the_js_client_starts_a_second_task_while_the_first_waits_for_input(
    push_system: System, fake_llm: FakeOpenAI
) -> None:
    said = iter([verdict(False, 20, "Which city?", user_input_needed=True, questions=["City?"])])
    fake_llm.script("fake-evaluator", lambda body: next(said, verdict(True, 90, "Good.")))
    seen = await flow(push_system, "tasks")
    assert seen["first"]["state"] == INPUT_REQUIRED
    assert seen["second"]["state"] == COMPLETED and seen["second"]["id"] != seen["first"]["id"]
    assert seen["second"]["contextId"] == seen["contextId"]
    assert seen["waiting"] == INPUT_REQUIRED
    assert seen["answered"] == {"id": seen["first"]["id"], "state": COMPLETED}


async def test_the_js_client_sends_a_message_of_data_alone(
    push_system: System, fake_llm: FakeOpenAI
) -> None:
    seen = await flow(push_system, "data")
    assert seen["state"] == COMPLETED
    prompt = json.dumps(fake_llm.chat_calls("fake-frontline")[-1])
    assert "Lyon" in prompt and "untrusted" in prompt


async def test_the_js_client_pages_through_list_tasks(push_system: System) -> None:
    seen = await flow(push_system, "paging")
    newest_first = seen["ids"][::-1]
    assert seen["first"] == {"ids": newest_first[:2], "pageSize": 2, "totalSize": 3}
    assert seen["rest"] == {"ids": newest_first[2:], "pageSize": 1, "next": ""}
    assert seen["empty"] == {"pageSize": 0, "totalSize": 0}
    assert seen["zero"]["refused"] and "pageSize" in seen["zero"]["message"]


async def test_the_js_client_gets_push_notifications_and_a_private_webhook_is_refused(
    push_system: System, webhook: Webhook
) -> None:
    seen = await flow(push_system, "push", webhook.url + HOOK, "http://192.168.1.10/hook")
    task = seen["task"]["id"]
    assert seen["task"]["state"] == COMPLETED
    assert seen["made"] == {"id": "second", "taskId": task, "url": webhook.url + HOOK}
    assert len(seen["listed"]) == 2 and "second" in seen["listed"]
    assert seen["refused"]["refused"] and "192.168.1.10" in seen["refused"]["message"]

    def ended() -> bool:
        return any("task" in r.json() for r in webhook.posts(task, 200))

    await webhook.until(ended)
    posts = webhook.posts(task, 200)
    assert all(p.headers["x-a2a-notification-token"] == "js-token" for p in posts)
    # POSTs are made concurrently, so a step may land after the end: the end is the task.
    ends = [p.json()["task"] for p in posts if "task" in p.json()]
    assert [t["status"]["state"] for t in ends] == ["TASK_STATE_COMPLETED"]
