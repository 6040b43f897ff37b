"""`sidekick up`: embedded nats-server, five child processes, restart on death (of a service and
of the nats-server), the banner, and a clean stop."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.fakes.openai_server import FakeOpenAI, Reply
from tests.support.harness import Client
from tests.support.scripts import last_user
from tests.support.upproc import Up, alive, children_of, cmdline


@pytest.fixture
def up(tmp_path: Path, fake_llm: FakeOpenAI) -> Iterator[Up]:
    handle = Up(tmp_path, fake_llm.base_url)
    yield handle
    handle.kill()


async def test_up_serves_chat_restarts_a_dead_child_and_stops_without_orphans(up: Up) -> None:
    up.wait_for("Sidekick is up")
    async with Client(up.ws_url) as client:
        assert (await client.ask("hello")).text
        assert (await client.ask("search the news")).answer.startswith("Answer to:")

    kids = children_of(up.proc.pid)
    assert len(kids) == 6, "nats-server and five services"
    services = [p for p in kids if "services.cli" in cmdline(p)]
    mark = len(up.output())
    os.kill(services[1], signal.SIGKILL)
    up.wait_for("restarting", after=mark)
    up.wait_for("ready", timeout=30, after=mark)
    async with Client(up.ws_url) as client:
        deadline = time.monotonic() + 60
        while True:  # the restarted child may take a moment to join its consumer
            convo = await client.ask("search again")
            if convo.answer.startswith("Answer to:") or time.monotonic() > deadline:
                break
        assert convo.answer.startswith("Answer to:")

    kids = children_of(up.proc.pid)
    assert up.interrupt(signal.SIGTERM) == 0
    deadline = time.monotonic() + 10
    while any(alive(p) for p in kids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in kids if alive(p)], "every child stopped with its parent"


def test_the_banner_gives_real_urls_a_chat_line_that_works_and_what_is_off(up: Up) -> None:
    up.wait_for("Ctrl-C stops it.")
    out = up.output()
    base = f"http://127.0.0.1:{up.gateway_port}"
    assert f"web page    {base}/" in out
    assert f"WebSocket   {up.ws_url}" in out
    assert f"metrics     gateway {base}/metrics" in out
    for service in ("frontline", "orchestrator", "evaluator", "workers"):
        (url,) = re.findall(rf"{service} (http://127\.0\.0\.1:\d+/metrics)", out)
        with urllib.request.urlopen(url, timeout=5) as resp:
            assert b"sidekick_ready 1.0" in resp.read(), service
    # Pasted into another terminal (no virtualenv there), it reaches this port.
    (chat,) = re.findall(r"chat +(\S+ chat --url \S+)", out)
    assert chat.split()[0].endswith("/bin/sidekick") and os.access(chat.split()[0], os.X_OK)
    assert chat.endswith(f"--url {up.ws_url}")
    # The fake model is configured; search, email and notifications are not.
    assert "No model is configured" not in out
    assert "search      off: BRAVE_SEARCH_API_KEY is not set" in out
    assert "email       not sent:" in out and "local outbox" in out
    assert "notify      off: PUSHOVER_TOKEN and PUSHOVER_USER are not set" in out


def test_readyz_lists_every_service_that_answered_over_the_bus(up: Up) -> None:
    up.wait_for("Sidekick is up")
    with urllib.request.urlopen(f"{up.http_url}/readyz", timeout=10) as resp:
        report = json.loads(resp.read())
    assert report["ready"] is True and report["waiting_for"] == []
    assert set(report["services"]) == {"frontline", "orchestrator", "evaluator", "workers"}
    assert all(s["ready"] and s["replicas"] == 1 for s in report["services"].values())


async def test_up_restarts_a_dead_nats_server_and_an_acknowledged_request_still_ends(
    up: Up, fake_llm: FakeOpenAI
) -> None:
    hold = threading.Event()
    fake_llm.script("fake-worker", lambda body: Reply("Done: " + last_user(body), wait=hold))
    up.wait_for("Sidekick is up")
    async with Client(up.ws_url, events=True) as client:
        await client.send({"uuid": client.uuid, "message": "search the tides", "request_id": "r1"})
        while (await client.recv()).get(
            "stage"
        ) != "attempt_started":  # acknowledged; worker holds it
            pass
        mark = len(up.output())
        os.kill(up.nats_pid(), signal.SIGKILL)
        up.wait_for("nats-server exited", after=mark)
        up.wait_for("nats-server is back", after=mark)
        hold.set()
        convo = await client.until_end(timeout=120)
    assert convo.end["status"] == "completed", convo.frames
    assert "Done: " in convo.text
    async with Client(up.ws_url) as client:  # and the system goes on
        assert (await client.ask("hello again")).text
    assert up.interrupt(signal.SIGTERM) == 0
