"""A2A push notifications on the real system, through the official `a2a-sdk` client: a task's
webhook configs made, read, listed and deleted (1.0 and 0.3 names), scoped to their principal;
a webhook on a private address refused at config time; each step and the end POSTed once to a
webhook allowed by the operator (SIDEKICK_EGRESS_ALLOW), with the client's token echoed and
Sidekick's JWT, verified as a receiver would: the key from /.well-known/jwks.json by its kid,
and the body's hash; a webhook that fails at first gets the event later, still once; a task
whose webhook came after its end gets that end, once; and a request no client asked to be
notified of puts nothing on the push subjects (it costs the outbox no message)."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import jwt
import nats
import pytest
from a2a.client.transports.jsonrpc import JsonRpcTransport
from a2a.types.a2a_pb2 import (
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError
from nats.aio.msg import Msg

from contracts import Subjects
from tests.support.fakes.webhook import HOOK, Webhook
from tests.support.gateway_client import bearer
from tests.support.harness import System


@pytest.fixture
async def kim(push_system: System) -> AsyncIterator[tuple[httpx.AsyncClient, JsonRpcTransport]]:
    base = push_system.http_url
    async with httpx.AsyncClient(base_url=base, timeout=90, headers=bearer("kim")) as http:
        yield http, await client_of(http, base)


async def client_of(http: httpx.AsyncClient, base: str) -> JsonRpcTransport:
    from a2a.client import A2ACardResolver

    card = await A2ACardResolver(http, base).get_agent_card()
    (v1,) = [i for i in card.supported_interfaces if i.protocol_version == "1.0"]
    return JsonRpcTransport(http, card, v1.url)


def say(text: str, **config: Any) -> SendMessageRequest:
    message = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[Part(text=text)])
    request = SendMessageRequest(message=message)
    if config:
        request.configuration.CopyFrom(SendMessageConfiguration(**config))
    return request


async def test_configs_are_made_read_listed_and_deleted_and_only_by_their_principal(
    push_system: System, kim: tuple[httpx.AsyncClient, JsonRpcTransport], webhook: Webhook
) -> None:
    http, client = kim
    task = (await client.send_message(say("Hello there"))).task
    made = await client.create_task_push_notification_config(
        TaskPushNotificationConfig(task_id=task.id, url=webhook.url + HOOK, token="kim-secret")
    )
    assert made.id and made.task_id == task.id and made.token == "kim-secret"
    got = await client.get_task_push_notification_config(
        GetTaskPushNotificationConfigRequest(task_id=task.id, id=made.id)
    )
    assert got.url == webhook.url + HOOK
    listed = await client.list_task_push_notification_configs(
        ListTaskPushNotificationConfigsRequest(task_id=task.id)
    )
    assert [c.id for c in listed.configs] == [made.id]
    # 0.3's names and shapes for the same config.
    body = {"jsonrpc": "2.0", "id": 1, "method": "tasks/pushNotificationConfig/get"}
    old = (await http.post("/a2a", json={**body, "params": {"id": task.id}})).json()
    assert old["result"]["pushNotificationConfig"]["id"] == made.id
    async with httpx.AsyncClient(
        base_url=push_system.http_url, timeout=90, headers=bearer("lou")
    ) as lou_http:
        lou = await client_of(lou_http, push_system.http_url)
        with pytest.raises(TaskNotFoundError):
            await lou.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task.id)
            )
    await client.delete_task_push_notification_config(
        DeleteTaskPushNotificationConfigRequest(task_id=task.id, id=made.id)
    )
    listed = await client.list_task_push_notification_configs(
        ListTaskPushNotificationConfigsRequest(task_id=task.id)
    )
    assert list(listed.configs) == []


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/hook",  # loopback, not allowed by the operator
        "http://10.1.2.3/hook",  # private
        "http://169.254.169.254/latest/meta-data",  # the cloud metadata address
        "http://[::1]:8080/hook",
        "file:///etc/passwd",
    ],
)
async def test_a_webhook_that_is_not_a_public_address_is_refused_when_it_is_given(
    kim: tuple[httpx.AsyncClient, JsonRpcTransport], url: str
) -> None:
    _, client = kim
    task = (await client.send_message(say("Hello there"))).task
    with pytest.raises(InvalidParamsError) as refused:
        await client.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=task.id, url=url)
        )
    assert "refused" in str(refused.value) and "public" in str(refused.value)
    config = TaskPushNotificationConfig(url=url)
    with pytest.raises(InvalidParamsError):  # on SendMessage too, before any task starts
        await client.send_message(say("Hello there", task_push_notification_config=config))


async def test_every_step_and_the_end_are_posted_once_signed_with_the_token_echoed(
    push_system: System, kim: tuple[httpx.AsyncClient, JsonRpcTransport], webhook: Webhook
) -> None:
    http, client = kim
    webhook.failing = 1  # the first POST fails: that event comes again, and is taken once
    config = TaskPushNotificationConfig(url=webhook.url + HOOK, token="kim-token-1")
    request = say("Please route: a plan", task_push_notification_config=config)
    task = (await client.send_message(request)).task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED

    def ended() -> bool:
        return any("task" in r.json() for r in webhook.posts(task.id, 200))

    await webhook.until(ended)
    (failed,) = webhook.posts(task.id, 503)
    again = failed.headers["x-sidekick-event-id"]

    def retried() -> bool:  # after a delay of its own (the outbox's backoff)
        return again in [r.headers["x-sidekick-event-id"] for r in webhook.posts(task.id, 200)]

    await webhook.until(retried)
    posts = webhook.posts(task.id, 200)
    ids = [r.headers["x-sidekick-event-id"] for r in posts]
    assert len(ids) == len(set(ids)), "an event was delivered twice"
    jwks = jwt.PyJWKSet.from_dict((await http.get("/.well-known/jwks.json")).json())
    states = []
    for post in posts:
        assert post.headers["x-a2a-notification-token"] == "kim-token-1"
        token = post.headers["authorization"].removeprefix("Bearer ")
        kid = jwt.get_unverified_header(token)["kid"]
        key = next(k for k in jwks.keys if k.key_id == kid)
        claims = jwt.decode(token, key.key, algorithms=["RS256"])
        assert claims["request_body_sha256"] == hashlib.sha256(post.body).hexdigest()
        assert claims["task_id"] == task.id
        body = post.json()
        update = body["task"] if "task" in body else body["statusUpdate"]
        states.append(update["status"]["state"])
    assert "TASK_STATE_WORKING" in states and states.count("TASK_STATE_COMPLETED") == 1
    final = next(p.json() for p in posts if "task" in p.json())
    (answer,) = [a for a in final["task"]["artifacts"] if a["artifactId"] == "answer"]
    assert answer["parts"][0]["text"].startswith("Answer to")


async def test_a_task_whose_webhook_comes_after_its_end_gets_its_end_posted_once(
    kim: tuple[httpx.AsyncClient, JsonRpcTransport], webhook: Webhook
) -> None:
    _, client = kim
    task = (await client.send_message(say("Hello there"))).task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED  # ended before any webhook
    config = TaskPushNotificationConfig(
        task_id=task.id, id="late", url=webhook.url + HOOK, token="kim-late"
    )
    await client.create_task_push_notification_config(config)

    def ended() -> bool:
        return any("task" in r.json() for r in webhook.posts(task.id, 200))

    await webhook.until(ended)
    # The same config made again (its id kept) marks the task again: the end is not sent twice.
    await client.create_task_push_notification_config(config)
    await asyncio.sleep(3.0)  # time for a second POST, were one to come
    posts = webhook.posts(task.id)
    assert len(posts) == 1, [p.json() for p in posts]
    (post,) = posts
    assert post.headers["x-a2a-notification-token"] == "kim-late"
    body = post.json()
    assert body["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    (answer,) = [a for a in body["task"]["artifacts"] if a["artifactId"] == "answer"]
    assert answer["parts"][0]["text"]


async def test_a_request_without_a_webhook_puts_nothing_on_the_push_subjects(
    push_system: System, kim: tuple[httpx.AsyncClient, JsonRpcTransport], webhook: Webhook
) -> None:
    _, client = kim
    s = Subjects(push_system.namespace)
    heard: list[str] = []
    nc = await nats.connect(push_system.nats_url)  # the admin's: it may hear every subject
    try:

        async def take(msg: Msg) -> None:
            heard.append(msg.subject)

        await nc.subscribe(s.push_all, cb=take)
        await nc.flush()
        plain = (await client.send_message(say("Please route: a plan"))).task
        assert plain.status.state == TaskState.TASK_STATE_COMPLETED
        await asyncio.sleep(2.0)  # anything published late would have come by now
        assert heard == [], f"a request without a webhook was published for the outbox: {heard}"
        # The same request with a webhook is heard there (the subscription does hear): its
        # steps and its end, and nothing of any other request.
        config = TaskPushNotificationConfig(url=webhook.url + HOOK)
        request = say("Please route: a plan", task_push_notification_config=config)
        notified = (await client.send_message(request)).task
        assert notified.status.state == TaskState.TASK_STATE_COMPLETED
        for _ in range(100):
            if s.push(notified.id, "completed") in heard:
                break
            await asyncio.sleep(0.05)
        assert s.push(notified.id, "completed") in heard
        assert s.push(notified.id, "progress") in heard
        assert {h.split(".")[2] for h in heard} == {notified.id}
    finally:
        await nc.close()
