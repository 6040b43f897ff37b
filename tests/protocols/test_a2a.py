"""The A2A server against the real system, through the official `a2a-sdk` client (its card
resolver, its 1.0 JSON-RPC transport and its 0.3 one), and raw JSON-RPC for the errors: the
card, a task answered, streamed, listed by cursor, cancelled, a clarification round trip, and
another principal's task, which does not exist for the caller."""

from __future__ import annotations

import uuid
from typing import Any, get_args

import httpx
import pytest
from a2a.compat.v0_3.jsonrpc_transport import CompatJsonRpcTransport
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    SendMessageConfiguration,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import TaskNotFoundError, UnsupportedOperationError

from contracts.state import RequestState
from services.gateway.a2a.tasks import STATES
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.gateway_client import bearer
from tests.support.harness import System
from tests.support.protocols import say, transport
from tests.support.scripts import held, verdict
from tests.support.sse import events


async def rpc(http: httpx.AsyncClient, method: str, params: Any, **headers: str) -> Any:
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
    response = await http.post("/a2a", json=body, headers=headers)
    return response.json()


async def test_the_card_names_the_skills_and_the_json_rpc_interfaces(
    system: System, http: httpx.AsyncClient
) -> None:
    card, _ = await transport(http, system.http_url)
    assert card.name == "Sidekick"
    assert {s.id for s in card.skills} == {"search", "research", "email", "general", "tools"}
    assert all(s.examples for s in card.skills)
    assert card.capabilities.streaming and card.capabilities.push_notifications
    assert {(i.protocol_binding, i.protocol_version) for i in card.supported_interfaces} == {
        ("JSONRPC", "1.0"),
        ("JSONRPC", "0.3"),
    }
    assert all(i.url == f"{system.http_url}/a2a" for i in card.supported_interfaces)
    old = (await http.get("/.well-known/agent.json")).json()
    assert old == (await http.get("/.well-known/agent-card.json")).json()
    assert old == (await http.get("/a2a/.well-known/agent-card.json")).json()


async def test_a_message_becomes_a_completed_task_that_get_and_list_find(
    system: System, http: httpx.AsyncClient
) -> None:
    _, client = await transport(http, system.http_url)
    context = "ctx-" + uuid.uuid4().hex[:8]
    sent = await client.send_message(say("Hello there", context_id=context))
    task = sent.task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert task.context_id == context
    (answer,) = [a for a in task.artifacts if a.artifact_id == "answer"]
    assert answer.parts[0].text == "Hello there! How can I help you today?"
    got = await client.get_task(GetTaskRequest(id=task.id))
    assert got.status.state == TaskState.TASK_STATE_COMPLETED
    second = (await client.send_message(say("Hi again", context_id=context))).task
    page = await client.list_tasks(ListTasksRequest(context_id=context, page_size=1))
    assert [t.id for t in page.tasks] == [second.id] and page.total_size == 2
    rest = await client.list_tasks(
        ListTasksRequest(context_id=context, page_size=1, page_token=page.next_page_token)
    )
    assert [t.id for t in rest.tasks] == [task.id] and rest.next_page_token == ""


async def test_a_streamed_message_sends_the_task_then_its_updates(
    system: System, http: httpx.AsyncClient, fake_llm: FakeOpenAI
) -> None:
    _, client = await transport(http, system.http_url)
    seen = [r async for r in client.send_message_streaming(say("Please route: a plan"))]
    assert seen[0].HasField("task")
    states = [r.status_update.status.state for r in seen if r.HasField("status_update")]
    assert states[-1] == TaskState.TASK_STATE_COMPLETED
    assert TaskState.TASK_STATE_WORKING in states
    answers = [r.artifact_update for r in seen if r.HasField("artifact_update")]
    assert answers[-1].last_chunk and answers[-1].artifact.parts[0].text.startswith("Answer to")


async def test_a_clarification_is_input_required_and_the_message_with_its_id_answers_it(
    system: System, http: httpx.AsyncClient, fake_llm: FakeOpenAI
) -> None:
    said = iter([verdict(False, 20, "Which city?", user_input_needed=True, questions=["City?"])])
    fake_llm.script("fake-evaluator", lambda body: next(said, verdict(True, 90, "Good.")))
    _, client = await transport(http, system.http_url)
    task = (await client.send_message(say("Please route: weather tomorrow"))).task
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert "City?" in task.status.message.parts[0].text
    # Issue 36 changed this on purpose: a message without a taskId is a new task of the context
    # (A2A allows several), not a refusal (-32004); the waiting task is answered by its id only.
    other = (await client.send_message(say("Hello there", context_id=task.context_id))).task
    assert other.id != task.id and other.context_id == task.context_id
    assert other.status.state == TaskState.TASK_STATE_COMPLETED
    waiting = await client.get_task(GetTaskRequest(id=task.id))
    assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    done = (await client.send_message(say("Paris", task_id=task.id))).task
    assert done.id == task.id
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert "Paris" in str(fake_llm.chat_calls("fake-worker")[-1])
    with pytest.raises(UnsupportedOperationError):  # answered: it takes no more messages
        await client.send_message(say("Lyon", task_id=task.id))


async def test_a_cancelled_task_is_canceled_and_cannot_be_cancelled_again(
    system: System, http: httpx.AsyncClient, fake_llm: FakeOpenAI
) -> None:
    _, client = await transport(http, system.http_url)
    request = say("Please route: a long job")
    request.configuration.CopyFrom(SendMessageConfiguration(return_immediately=True))
    with held(fake_llm, "fake-worker", "late"):
        task = (await client.send_message(request)).task
        assert task.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
        updates = client.subscribe(SubscribeToTaskRequest(id=task.id))
        first = await anext(updates)
        assert first.task.id == task.id
        cancelled = await client.cancel_task(CancelTaskRequest(id=task.id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
        last = [r async for r in updates][-1]
        assert last.status_update.status.state == TaskState.TASK_STATE_CANCELED
    again = await rpc(http, "CancelTask", {"id": task.id})
    assert again["error"]["code"] == -32002


async def test_the_0_3_client_and_method_names_work_unchanged(
    system: System, http: httpx.AsyncClient
) -> None:
    card, _ = await transport(http, system.http_url)
    old = CompatJsonRpcTransport(http, card, f"{system.http_url}/a2a")
    task = (await old.send_message(say("Hello from 0.3"))).task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert (await old.get_task(GetTaskRequest(id=task.id))).id == task.id
    raw = await rpc(http, "tasks/get", {"id": task.id})
    assert raw["result"]["kind"] == "task" and raw["result"]["status"]["state"] == "completed"
    streamed = [r async for r in old.send_message_streaming(say("Hello, streamed"))]
    assert streamed[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/stream",
        "params": {
            "message": {
                "kind": "message",
                "messageId": uuid.uuid4().hex,
                "role": "user",
                "parts": [{"kind": "text", "text": "Hello, raw 0.3"}],
            }
        },
    }
    async with http.stream("POST", "/a2a", json=body) as response:
        kinds = [e.json["result"]["kind"] async for e in events(response)]
    assert kinds[0] == "task" and kinds[-1] == "status-update"


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ("{not json", -32700),
        ("[]", -32600),
        ('{"jsonrpc": "1.0", "id": 1, "method": "GetTask"}', -32600),
        ('{"jsonrpc": "2.0", "id": 1, "method": "NoSuchMethod", "params": {}}', -32601),
        ('{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": 5}}', -32602),
        ('{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": []}', -32602),
        ('{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "nope"}}', -32001),
        ('{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "nope"}}', -32001),
    ],
)
async def test_bad_json_rpc_gets_the_standard_codes(
    http: httpx.AsyncClient, body: str, code: int
) -> None:
    answer = await http.post("/a2a", content=body, headers={"content-type": "application/json"})
    assert answer.json()["error"]["code"] == code


@pytest.mark.parametrize(
    ("method", "params", "code"),
    [
        # Push notifications are offered since issue 36 (tests/protocols/test_a2a_push.py):
        # a config for a task that is not the caller's is TaskNotFound, a malformed one invalid.
        ("CreateTaskPushNotificationConfig", {"taskId": "t", "url": "http://x"}, -32001),
        ("tasks/pushNotificationConfig/set", {"taskId": "t"}, -32602),
        ("ListTaskPushNotificationConfigs", {"taskId": "t"}, -32001),
        ("GetExtendedAgentCard", {}, -32007),
        ("agent/getAuthenticatedExtendedCard", {}, -32007),
        (
            "SendMessage",
            {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"url": "http://x"}]}},
            -32005,
        ),
        (
            "SendMessage",
            {
                "message": {"messageId": "m2", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
                "configuration": {"taskPushNotificationConfig": {"url": "ftp://x"}},
            },
            -32602,
        ),
        ("SubscribeToTask", {"id": "nope"}, -32001),
    ],
)
async def test_undeclared_features_and_bad_params_answer_the_spec_errors(
    http: httpx.AsyncClient, method: str, params: dict[str, Any], code: int
) -> None:
    assert (await rpc(http, method, params))["error"]["code"] == code


async def test_an_unsupported_version_header_is_refused(http: httpx.AsyncClient) -> None:
    answer = await rpc(http, "GetTask", {"id": "x"}, **{"A2A-Version": "2.0"})
    assert answer["error"]["code"] == -32009


async def test_another_principals_task_is_not_found_and_tokens_are_required(
    secure_system: System,
) -> None:
    base = secure_system.http_url
    async with httpx.AsyncClient(base_url=base, timeout=90) as anonymous:
        card = (await anonymous.get("/.well-known/agent-card.json")).json()
        assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "bearer"
        assert (await anonymous.post("/a2a", json={})).status_code == 401
    async with (
        httpx.AsyncClient(base_url=base, timeout=90, headers=bearer("kim")) as kim,
        httpx.AsyncClient(base_url=base, timeout=90, headers=bearer("lou")) as lou,
    ):
        _, client = await transport(kim, base)
        task = (await client.send_message(say("Hello, mine"))).task
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        _, other = await transport(lou, base)
        for call in (
            other.get_task(GetTaskRequest(id=task.id)),
            other.cancel_task(CancelTaskRequest(id=task.id)),
        ):
            with pytest.raises(TaskNotFoundError):
                await call
        listed = await other.list_tasks(ListTasksRequest())
        assert task.id not in [t.id for t in listed.tasks]
        subscribed = await rpc(lou, "SubscribeToTask", {"id": task.id})
        assert subscribed["error"]["code"] == -32001
        answered = await rpc(
            lou,
            "SendMessage",
            {
                "message": {
                    "messageId": "x",
                    "taskId": task.id,
                    "role": "ROLE_USER",
                    "parts": [{"text": "mine now"}],
                }
            },
        )
        assert answered["error"]["code"] == -32001


def test_every_request_state_has_a_task_state() -> None:
    """A new state of a request's life (an approval, say) needs its entry in STATES."""
    assert set(get_args(RequestState)) == set(STATES)
