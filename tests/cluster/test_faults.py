"""A service killed mid-request: the request still completes, once."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from nats.aio.client import Client as NATS

from contracts import Subjects
from tests.support.fakes.openai_server import FakeOpenAI, Reply
from tests.support.harness import Client, System
from tests.support.scripts import verdict
from tests.support.waits import wait_for


async def terminal_events(nc: NATS, namespace: str, request_id: str) -> list[dict[str, Any]]:
    """Every terminal event stored for a request in the results stream."""
    js = nc.jetstream()
    stream = Subjects(namespace).results_stream
    info = await js.stream_info(stream)
    found = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        msg = await js.get_msg(stream, seq)
        data = json.loads(msg.data or b"{}")
        # The stream keeps the chunks and progress too; the ends are what counts here.
        if data.get("request_id") == request_id and data.get("kind", "").startswith("request."):
            found.append(data)
    return found


async def test_orchestrator_killed_between_attempts_completes_the_request_once(
    system: System, fake_llm: FakeOpenAI, nc: NATS
) -> None:
    hold = threading.Event()
    answers = iter(["attempt one", "attempt two"])
    fake_llm.script("fake-worker", lambda body: next(answers))
    verdicts = iter(
        [
            Reply(json.dumps(verdict(False, 30, "add detail")), wait=hold),
            Reply(json.dumps(verdict(True, 95, "good"))),
        ]
    )
    fake_llm.script("fake-evaluator", lambda body: next(verdicts))
    async with Client(system.ws_url, events=True) as client:
        await client.send(
            {"uuid": client.uuid, "message": "search something", "request_id": "crash-1"}
        )
        await wait_for(lambda: len(fake_llm.chat_calls("fake-evaluator")) == 1)
        system.kill("orchestrator")
        hold.set()  # the failing verdict lands while no orchestrator runs
        await asyncio.to_thread(system.restart, "orchestrator")
        convo = await client.until_end()
    assert convo.answer == "attempt two"
    assert convo.end["status"] == "completed" and convo.end["metadata"]["attempts"] == 2
    assert len(fake_llm.chat_calls("fake-worker")) == 2
    finals = await terminal_events(nc, system.namespace, "crash-1")
    assert len(finals) == 1 and finals[0]["kind"] == "request.completed"
