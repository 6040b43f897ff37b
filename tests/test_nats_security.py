"""NATS locked down: each service has its own user, limited to its own subjects."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import nats
import pytest
from nats.aio.client import Client as NATS

from contracts import Subjects
from services.runtime.bus import ensure_topology
from services.runtime.natsauth import ADMIN, SERVICES, Credentials, write_config
from services.runtime.natsserver import NatsServer
from tests.support.fakes.openai_server import FakeOpenAI, Reply, verdict
from tests.support.gateway_client import wait_status
from tests.support.harness import ROOT, Client, System, free_port, llm_env

NAMESPACE = "locked"


@dataclass
class LockedSystem(System):
    """The five services, each connecting as its own NATS user."""

    creds: Credentials = field(default_factory=Credentials)

    def start(self, name: str) -> None:
        self.env["SIDEKICK_NATS_URL"] = self.creds.url(self.nats_url, name)
        super().start(name)


def locked_server(directory: Path, namespace: str, creds: Credentials) -> NatsServer:
    config = write_config(directory / "nats.conf", namespace, admin=ADMIN in creds.passwords)
    return NatsServer(store_dir=directory / "js", config_file=config, env=creds.env()).start()


@pytest.fixture(scope="module")
def bare_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[NatsServer, Credentials]]:
    creds = Credentials.generate((*SERVICES, ADMIN))
    server = locked_server(tmp_path_factory.mktemp("locked-bare"), NAMESPACE, creds)
    yield server, creds
    server.stop()


@pytest.fixture(scope="module")
def locked_system(
    tmp_path_factory: pytest.TempPathFactory, fake_llm: FakeOpenAI, logs_dir: Path
) -> Iterator[tuple[LockedSystem, NatsServer]]:
    creds = Credentials.generate()
    sys_ = LockedSystem("", llm_env(fake_llm.base_url), logs_dir, creds=creds)
    server = locked_server(tmp_path_factory.mktemp("locked-system"), sys_.namespace, creds)
    sys_.nats_url = server.url
    sys_.start_all()
    yield sys_, server
    sys_.stop()
    server.stop()


class User:
    """A NATS connection as one user, collecting the server's permission errors."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.nc = NATS()

    async def connect(self, url: str) -> User:
        async def on_error(exc: Exception) -> None:
            self.errors.append(str(exc))

        await self.nc.connect(url, error_cb=on_error, max_reconnect_attempts=0)
        return self

    async def denied(self, subject: str) -> bool:
        """Publish; True once the server reported a publish violation for `subject`."""
        await self.nc.publish(subject, b"{}")
        await self.nc.flush()
        # nats-py lower-cases the server's message.
        wanted = f'permissions violation for publish to "{subject}"'.lower()
        for _ in range(100):
            if any(wanted in e.lower() for e in self.errors):
                return True
            await asyncio.sleep(0.02)
        return False


@pytest.fixture
async def users(bare_server: tuple[NatsServer, Credentials]) -> AsyncIterator[dict[str, User]]:
    server, creds = bare_server
    connected = {u: await User().connect(creds.url(server.url, u)) for u in (*SERVICES, ADMIN)}
    await ensure_topology(connected[ADMIN].nc.jetstream(), Subjects(NAMESPACE))
    yield connected
    for user in connected.values():
        await user.nc.close()


async def test_a_service_with_another_services_credentials_cannot_publish_its_subjects(
    users: dict[str, User],
) -> None:
    s = Subjects(NAMESPACE)
    denied = [
        *((other, s.chat_requested) for other in SERVICES if other != "gateway"),
        ("frontline", s.request_answered),
        ("workers", s.request_cancel),
        ("gateway", s.request_routed),
        ("workers", s.request_routed),
        ("gateway", s.request_completed("r1")),
        ("workers", s.request_completed("r1")),
        ("evaluator", s.request_failed("r1")),
        ("gateway", s.stream("r1")),
        *((other, s.worker_run("general")) for other in SERVICES if other != "orchestrator"),
        ("frontline", s.evaluator_run),
        ("workers", s.evaluator_run),
        *((other, s.evaluation_completed) for other in SERVICES if other != "evaluator"),
        *((other, s.worker_completed) for other in SERVICES if other != "workers"),
        ("workers", s.deadletter("orchestrator")),
        ("gateway", f"$KV.{s.requests_bucket}.some-request"),
        ("workers", f"$KV.{s.sessions_bucket}.some-session"),
        ("evaluator", f"$KV.{s.status_bucket}.some-request"),
    ]
    for user, subject in denied:
        assert await users[user].denied(subject), f"{user} could publish {subject}"
    # Nothing the others tried reached a stream; the owner's own publish is accepted.
    js = users[ADMIN].nc.jetstream()
    assert (await js.stream_info(s.work_stream)).state.messages == 0
    ack = await users["gateway"].nc.jetstream().publish(s.chat_requested, b"{}", timeout=5)
    assert ack.stream == s.work_stream
    with pytest.raises(asyncio.TimeoutError):  # no PubAck: the server dropped it
        await users["workers"].nc.jetstream().publish(s.chat_requested, b"{}", timeout=1)
    assert (await js.stream_info(s.work_stream)).state.messages == 1


async def test_a_service_cannot_listen_to_what_is_not_its_own(
    bare_server: tuple[NatsServer, Credentials], users: dict[str, User]
) -> None:
    s = Subjects(NAMESPACE)
    snoop = users["workers"]
    await snoop.nc.subscribe(s.out_all)  # the gateway's: every client's answers
    await snoop.nc.flush()
    wanted = f'permissions violation for subscription to "{s.out_all}"'
    for _ in range(100):
        if any(wanted in e for e in snoop.errors):
            break
        await asyncio.sleep(0.02)
    assert any(wanted in e for e in snoop.errors)

    server, _ = bare_server
    with pytest.raises(nats.errors.Error, match="Authorization Violation"):
        await nats.connect(
            server.url.replace("nats://", "nats://gateway:wrong-password@"),
            allow_reconnect=False,
            max_reconnect_attempts=0,
        )


async def test_every_service_does_its_work_under_its_own_user(
    locked_system: tuple[LockedSystem, NatsServer], fake_llm: FakeOpenAI
) -> None:
    system, server = locked_system
    verdicts = iter(
        [
            verdict(False, 40, "Too vague."),
            verdict(True, 90, "Good."),
            verdict(False, 20, "Which city?", user_input_needed=True, questions=["Which city?"]),
            verdict(True, 90, "Good."),
            verdict(True, 90, "Good."),
        ]
    )
    fake_llm.script("fake-evaluator", lambda body: next(verdicts))
    async with Client(system.ws_url, events=True) as client:
        greeting = await client.ask("hello")
        assert greeting.text and greeting.end["status"] == "completed"
        retried = await client.ask("search three examples")
        assert retried.end["status"] == "completed" and retried.end["metadata"]["attempts"] == 2
        parked = await client.ask("search the weather for my trip")
        assert parked.end["status"] == "awaiting_clarification"
        resumed = await client.ask("Lisbon")
        assert resumed.end["status"] == "completed"
        hold = threading.Event()
        fake_llm.script("fake-worker", lambda body: Reply("slow", wait=hold))
        try:
            await client.send({"uuid": client.uuid, "message": "search slowly"})
            ack = await client.recv()
            await client.send({"cancel": ack["request_id"]})
            cancelled = await client.until_end()
            assert cancelled.end["status"] == "cancelled"
        finally:
            hold.set()
    async with httpx.AsyncClient(base_url=system.http_url) as http:
        created = await http.post("/api/workflows", json={"text": "search the tides"})
        rid = created.json()["workflow_id"]
        await wait_status(http, rid, "completed")
    violations = [line for line in server.log_lines if "Violation" in line]
    assert violations == [], "\n".join(violations[:10])


def test_sidekick_up_gives_each_service_its_own_password_and_never_shows_one(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SIDEKICK_", "OPENAI_"))}
    env.update(llm_env(fake_llm.base_url))
    out = tmp_path / "up.log"
    data = tmp_path / "data"
    with out.open("w") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "services.cli",
                "up",
                "--port",
                str(port),
                "--data-dir",
                str(data),
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
    try:
        deadline = time.monotonic() + 90
        while "Sidekick is up" not in out.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, out.read_text()[-3000:]
            time.sleep(0.2)

        async def hello() -> str:
            async with Client(f"ws://127.0.0.1:{port}/ws") as client:
                return (await client.ask("hello")).text

        assert asyncio.run(hello())
        urls = {}
        for pid in children(proc.pid):
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if b"services.cli" in cmd:
                environ = dict(
                    item.split("=", 1)
                    for item in Path(f"/proc/{pid}/environ").read_text().split("\0")
                    if "=" in item
                )
                urls[cmd[cmd.index(b"run") + 1].decode()] = environ["SIDEKICK_NATS_URL"]
        assert sorted(urls) == sorted(SERVICES)
        passwords = set()
        for service, url in urls.items():
            user, _, rest = url.removeprefix("nats://").partition(":")
            assert user == service
            passwords.add(rest.split("@")[0])
        assert len(passwords) == len(SERVICES), "one password per service"
        config = (data / "nats.conf").read_text()
        assert oct((data / "nats.conf").stat().st_mode & 0o777) == "0o600"
        shown = out.read_text() + config
        for logfile in data.rglob("*.log"):
            shown += logfile.read_text(errors="replace")
        assert not [p for p in passwords if p in shown], "a password was written out"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def children(pid: int) -> list[int]:
    found = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True)
    return [int(p) for p in found.stdout.split()]
