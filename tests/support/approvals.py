"""What the approval tests share: a system whose email worker sends through the fake SendGrid
under the default policy (email asks), a WebSocket client that asks for an email (scripted by
`script_email`, tests/support/scripts.py) and reads the approval it parks on, answering it,
an operator's approval from its queue, and an approved call whose worker is killed mid-call."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx

from tests.support.fakes.http import FakeServer
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.fakes.sendgrid import FakeSendGrid
from tests.support.gateway_client import AuthClient, api
from tests.support.harness import System
from tests.support.scripts import script_email
from tests.support.systems import Systems


def emails_asked(systems: Systems, sendgrid: FakeSendGrid, **options: Any) -> Iterator[System]:
    """The system (tokens required), its email worker sending through `sendgrid` once a person
    says yes; `options` as `Systems.run` takes them."""
    return systems.run(workers="GENERAL,EMAIL", auth=True, sendgrid=sendgrid, **options)


@asynccontextmanager
async def asked_to_email(
    system: System, fake_llm: FakeOpenAI, principal: str, *bodies: str
) -> AsyncIterator[tuple[AuthClient, str, dict[str, Any]]]:
    """`principal`'s socket, on which it asked for an email (drafted with `bodies`, as
    `script_email` scripts them) and read the approval it parks on: (the client, the request
    id, the approval)."""
    script_email(fake_llm, *bodies)
    async with AuthClient(system.ws_url, principal, events=True) as client:
        request_id, approval = await ask_for_email(client)
        yield client, request_id, approval


async def ask_for_email(
    client: AuthClient, text: str = "email ada@example.com about friday"
) -> tuple[str, dict[str, Any]]:
    """Send the message and read up to the request's end: (request id, its approval)."""
    request_id = await client.ack(text)
    return request_id, await parked(client, request_id)


async def parked(client: AuthClient, request_id: str) -> dict[str, Any]:
    """Read up to the request's next end, which must be a park on one approval: the approval."""
    frames = await client.frames_until(
        lambda f: "on_chat_model_end" in f and f.get("request_id") == request_id, 90
    )
    (asked,) = [f for f in frames if f.get("event") == "clarification"]
    assert frames[-1]["status"] == "awaiting_clarification", frames[-1]
    return dict(asked["approval"])


async def answer(
    client: AuthClient, request_id: str, words: str, **extra: Any
) -> list[dict[str, Any]]:
    """Answer the parked request and read up to its next end (or an error frame)."""
    await client.send({"uuid": client.uuid, "message": words, "reply_to": request_id, **extra})
    return await client.frames_until(
        lambda f: ("on_chat_model_end" in f and f.get("request_id") == request_id) or "error" in f,
        90,
    )


async def feedback(http: httpx.AsyncClient, request_id: str, **body: object) -> httpx.Response:
    """POST the workflows API's feedback on `request_id` (an approval word, answers, ...)."""
    return await http.post(f"/api/workflows/{request_id}/feedback", json=body)


async def operator_approves(
    client: AuthClient, http_url: str, operator: str, request_id: str, approval: dict[str, Any]
) -> list[dict[str, Any]]:
    """`operator` approves from its queue; the request's frames on `client` up to its next end
    (a refusal's own end frame, "rejected", is not the request's)."""
    async with api(http_url, operator) as ops:
        path = f"/api/approvals/{approval['approval_id']}"
        decided = await ops.post(path, json={"decision": "approve"})
        assert decided.status_code == 200, decided.text
    return await client.frames_until(
        lambda f: (
            "on_chat_model_end" in f
            and f.get("request_id") == request_id
            and f.get("status") != "rejected"
        ),
        90,
    )


async def approved_then_killed(
    client: AuthClient, request_id: str, system: System, fake: FakeServer, what: str
) -> None:
    """Say yes; hold `fake`'s answer to the approved call until the workers are SIGKILLed in
    between (`what` did not start: the test fails so), then let it go and restart them."""
    fake.held = True
    await client.send({"uuid": client.uuid, "message": "yes", "reply_to": request_id})
    assert await asyncio.to_thread(fake.arrived.wait, 60), f"{what} never started"
    system.kill("workers")  # between the approval and the provider's answer
    fake.held = False
    fake.release.set()
    await asyncio.to_thread(system.restart, "workers")
