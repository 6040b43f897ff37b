"""A request's end cannot be silenced on the PUSH stream either, attacked with the workers' own
NATS user (as a compromised worker process would): the PUSH stream stores the progress a worker
publishes (`push.<request>.progress`), and the end of a request a client is notified of is
stored there once, under a dedupe key; a worker knows the ids of the requests it runs, so were
that key computable from the id alone (`<request>:push.final`, as it once was) it could store a
message first under it and have the real end dropped as a duplicate, and the task's webhook
would never be told that it ended. The key carries the request record's seal: it cannot."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from a2a.types.a2a_pb2 import SendMessageConfiguration, TaskPushNotificationConfig
from nats.aio.client import Client as NATS

from contracts import Subjects
from services.runtime.bus.core import msg_id
from tests.support.fakes.openai_server import FakeOpenAI, Reply
from tests.support.fakes.webhook import HOOK, Webhook
from tests.support.gateway_client import bearer
from tests.support.harness import System
from tests.support.natsusers import as_role, publish_as
from tests.support.protocols import say, transport
from tests.support.systems import Systems

REAL = "The real answer: Paris."
gate = threading.Event()  # holds the worker's model call until the attack is in


@pytest.fixture(scope="module")
def webhook() -> Iterator[Webhook]:
    with Webhook() as hook:
        yield hook


@pytest.fixture(scope="module")
def notified(systems: Systems, webhook: Webhook) -> Iterator[System]:
    """A system whose gateway may POST to `webhook` (the egress wall lets it through)."""
    yield from systems.run(auth=True, SIDEKICK_EGRESS_ALLOW=webhook.host_port)


@pytest.fixture
async def workers(notified: System) -> AsyncIterator[NATS]:
    """A connection with the workers' own credentials."""
    async with as_role(notified, "workers") as client:
        yield client


async def test_no_role_can_silence_a_requests_pushed_end(
    notified: System, workers: NATS, webhook: Webhook, fake_llm: FakeOpenAI
) -> None:
    gate.clear()
    fake_llm.script("fake-worker", lambda _: Reply(REAL, wait=gate))
    s = Subjects(notified.namespace)
    base = notified.http_url
    try:
        async with httpx.AsyncClient(base_url=base, timeout=90, headers=bearer("kim")) as http:
            _, client = await transport(http, base)
            request = say("search for Paris")
            config = TaskPushNotificationConfig(url=webhook.url + HOOK, token="kim-wall")
            request.configuration.CopyFrom(
                SendMessageConfiguration(
                    task_push_notification_config=config, return_immediately=True
                )
            )
            task = (await client.send_message(request)).task
            for _ in range(600):
                if fake_llm.chat_calls("fake-worker"):
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("the worker never got the task")
            # A progress message (a subject the workers may publish, stored by the PUSH
            # stream) under the id the pushed end used to be stored with.
            progress = s.push(task.id, "progress")
            await publish_as(workers, progress, b'{"stale": true}', msg_id(task.id, "push.final"))
            gate.set()

            def ended() -> bool:
                return any("task" in r.json() for r in webhook.posts(task.id, 200))

            try:
                await webhook.until(ended, timeout=90)
            except AssertionError:
                raise AssertionError("the task's end never reached its webhook: silenced") from None
    finally:
        gate.set()
    (final,) = [r.json() for r in webhook.posts(task.id, 200) if "task" in r.json()]
    assert final["task"]["status"]["state"] == "TASK_STATE_COMPLETED", final
    (answer,) = [a for a in final["task"]["artifacts"] if a["artifactId"] == "answer"]
    assert answer["parts"][0]["text"] == REAL, answer
