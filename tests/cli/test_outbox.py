"""`sidekick outbox` against a gateway that requires tokens: it sends the caller's bearer token
(`--token`, or `$SIDEKICK_TOKEN` as for `sidekick chat`) and shows that principal's mail; without
a token, or with a wrong one, it says what to do instead of printing a traceback."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid

from nats.aio.client import Client as NATS

from contracts import Subjects
from contracts.email import OutboxEntry
from services.runtime.requests import outbox
from tests.support.gateway_client import token
from tests.support.harness import ROOT, System, sidekick


async def sidekick_outbox(
    gateway: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    # No SIDEKICK_TOKEN from the caller's environment.
    clean = {"PATH": "/usr/bin:/bin", **(env or {})}
    return await asyncio.to_thread(
        sidekick, "outbox", "--url", gateway, *args, env=clean, timeout=60
    )


async def test_outbox_sends_the_token_and_explains_a_refusal(
    secure_system: System, nc: NATS
) -> None:
    conversation = uuid.uuid4().hex[:12]
    entry = OutboxEntry(
        request_id=f"outbox-cli-{conversation}",
        session_id=f"alice/{conversation}",
        attempt=1,
        to=["cy@example.com"],
        subject="Kept for alice",
        body="Hi Cy.",
    )
    await outbox.put(nc.jetstream(), Subjects(secure_system.namespace), entry)
    gateway = secure_system.http_url

    with_flag = await sidekick_outbox(gateway, "--json", "--token", token("alice"))
    assert with_flag.returncode == 0, with_flag.stderr
    listed = json.loads(with_flag.stdout)
    assert entry.request_id in [e["request_id"] for e in listed]

    from_env = await sidekick_outbox(gateway, env={"SIDEKICK_TOKEN": token("alice")})
    assert from_env.returncode == 0, from_env.stderr
    assert "NOT SENT" in from_env.stdout and "Subject: Kept for alice" in from_env.stdout

    other = await sidekick_outbox(gateway, env={"SIDEKICK_TOKEN": token("bob")})
    assert other.returncode == 0, other.stderr
    assert "Kept for alice" not in other.stdout, "a token shows its own principal's mail only"

    missing = await sidekick_outbox(gateway)
    assert missing.returncode == 1 and missing.stdout == ""
    assert "requires a token" in missing.stderr
    assert "--token" in missing.stderr and "SIDEKICK_TOKEN" in missing.stderr
    assert "Traceback" not in missing.stderr

    wrong_token = "tok-nobody-0123456789"
    wrong = await sidekick_outbox(gateway, "--token", wrong_token)
    assert wrong.returncode == 1 and "refused the token" in wrong.stderr
    assert "Traceback" not in wrong.stderr
    assert wrong_token not in wrong.stdout + wrong.stderr, "a token is never printed"


async def test_outbox_from_an_unreachable_nats_says_so_without_the_password() -> None:
    password = "sk" + uuid.uuid4().hex
    unreachable = await asyncio.to_thread(
        subprocess.run,
        [
            sys.executable,
            "-m",
            "services.cli",
            "outbox",
            "--nats-url",
            f"nats://workers:{password}@127.0.0.1:1",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert unreachable.returncode == 1
    assert "could not read the outbox from nats://workers:***@127.0.0.1:1" in unreachable.stderr
    assert password not in unreachable.stdout + unreachable.stderr
    assert "Traceback" not in unreachable.stderr
