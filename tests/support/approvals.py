"""What the approval tests share: a system whose email worker sends through the fake SendGrid
under the default policy (email asks), and a WebSocket client that asks for an email and reads
the approval it parks on."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.fakes.sendgrid import FakeSendGrid
from tests.support.gateway_client import AuthClient, tokens_env
from tests.support.harness import System, llm_env
from tests.support.workers_support import by_schema, decide

SENDER = "sidekick@example.com"
BODY = "Hi Ada,\n\nThe meeting moved to 10am Friday.\n\nBest"


def approval_env(fake_llm: FakeOpenAI, sendgrid: FakeSendGrid, **env: str) -> dict[str, str]:
    return {
        **llm_env(fake_llm.base_url),
        "SIDEKICK_WORKERS": "GENERAL,EMAIL",
        "SENDGRID_API_KEY": sendgrid.key,
        "SENDGRID_FROM_EMAIL": SENDER,
        "SIDEKICK_SENDGRID_BASE_URL": sendgrid.url,
        "SIDEKICK_AUTH_TOKENS": tokens_env(),
        **env,
    }


def start(nats_url: str, env: dict[str, str], logs: Path) -> System:
    return System(nats_url, env, logs).start_all()


def script_email(fake_llm: FakeOpenAI, *bodies: str) -> None:
    """The orchestrator sends an email to ada@example.com; the worker's drafts have these
    bodies, one per draft, the last one repeated."""
    fake_llm.script(
        "fake-orchestrator",
        decide("EMAIL", "Email Ada", to="ada@example.com", subject="Friday"),
    )
    drafts = itertools.chain(bodies or (BODY,), itertools.repeat((bodies or (BODY,))[-1]))
    fake_llm.script(
        "fake-worker",
        by_schema({"EmailDraft": lambda body: {"subject": "x", "body": next(drafts)}}),
    )


async def ask_for_email(
    client: AuthClient, text: str = "email ada@example.com about friday"
) -> tuple[str, dict[str, Any]]:
    """Send the message and read up to the request's end: (request id, its approval frame)."""
    request_id = await client.ack(text)
    frames = await client.frames_until(
        lambda f: "on_chat_model_end" in f and f.get("request_id") == request_id, 90
    )
    (asked,) = [f for f in frames if f.get("event") == "clarification"]
    assert frames[-1]["status"] == "awaiting_clarification", frames[-1]
    return request_id, asked["approval"]


async def answer(
    client: AuthClient, request_id: str, words: str, **extra: Any
) -> list[dict[str, Any]]:
    """Answer the parked request and read up to its next end (or an error frame)."""
    await client.send({"uuid": client.uuid, "message": words, "reply_to": request_id, **extra})
    return await client.frames_until(
        lambda f: ("on_chat_model_end" in f and f.get("request_id") == request_id) or "error" in f,
        90,
    )
