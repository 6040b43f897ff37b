"""NATS locked down: each service has its own user, limited to its own subjects."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import nats
import pytest

from contracts import Subjects
from contracts.subjects import PUSHED
from services.runtime.bus.natsauth import ADMIN, SERVICES, Credentials
from services.runtime.bus.natslogin import variable
from services.runtime.bus.topology import (
    BUCKETS,
    consumers,
    durable_name,
    stream_configs,
)
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.harness import ROOT, Client, free_port, llm_env
from tests.support.natscluster import NatsCluster
from tests.support.natsusers import User, locked_server, users_of

NAMESPACE = "locked"


@dataclass(frozen=True)
class Seat:
    """Where the attack tests' users connect: one node (of a cluster, the second: the streams'
    leaders may be anywhere), and the replicas the bootstrap step makes there."""

    url: str
    replicas: int = 1


@pytest.fixture(scope="module", params=["one server", "3-node cluster"])
def bare_server(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[tuple[Seat, Credentials]]:
    """The attacks run on a lone server and on a 3-node cluster with R3 streams (each user on a
    node of its own choosing is held to its role the same)."""
    creds = Credentials.generate((*SERVICES, ADMIN))
    if request.param == "one server":
        server = locked_server(tmp_path_factory.mktemp("locked-bare"), NAMESPACE, creds)
        yield Seat(server.url), creds
        server.stop()
        return
    cluster = NatsCluster(tmp_path_factory.mktemp("locked-cluster"), NAMESPACE, creds=creds)
    cluster.start()
    yield Seat(cluster.nodes[1].url, replicas=3), creds
    cluster.stop()


@pytest.fixture
async def users(bare_server: tuple[Seat, Credentials]) -> AsyncIterator[dict[str, User]]:
    seat, creds = bare_server
    async with users_of(seat.url, creds, NAMESPACE, seat.replicas) as connected:
        yield connected


async def test_a_service_with_another_services_credentials_cannot_publish_its_subjects(
    users: dict[str, User],
) -> None:
    s = Subjects(NAMESPACE)
    denied = [
        # The frontline and the orchestrator start a session's next request when they end one.
        *((other, s.chat_requested) for other in ("evaluator", "workers")),
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
    bare_server: tuple[Seat, Credentials], users: dict[str, User]
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


async def test_no_service_may_create_change_delete_or_purge_a_stream_bucket_or_consumer(
    users: dict[str, User],
) -> None:
    s = Subjects(NAMESPACE)
    streams = [str(c.name) for c in stream_configs(s)] + [f"KV_{s.bucket(b)}" for b in BUCKETS]
    durables = [durable_name(s, c) for c in consumers(s)]
    api = "$JS.API"
    attacks = [f"{api}.STREAM.{verb}.{st}" for st in streams for verb in ("DELETE", "PURGE")]
    attacks += [f"{api}.STREAM.{verb}.{st}" for st in streams for verb in ("CREATE", "UPDATE")]
    attacks += [
        f"{api}.STREAM.CREATE.{s.namespace.upper()}_EVIL",
        f"{api}.STREAM.MSG.DELETE.{streams[0]}",
    ]
    attacks += [f"{api}.CONSUMER.DELETE.{s.work_stream}.{d}" for d in durables]
    attacks += [
        f"{api}.CONSUMER.CREATE.{s.work_stream}.evil",
        f"{api}.CONSUMER.DURABLE.CREATE.{s.work_stream}.evil",
    ]
    for service in SERVICES:
        for subject in attacks:
            assert await users[service].denied(subject), f"{service} may {subject}"
    js = users[ADMIN].nc.jetstream()
    for stream in streams:  # all still there, none emptied
        await js.stream_info(stream)
    for durable in durables:
        await js.consumer_info(s.work_stream, durable)


async def test_each_service_reads_only_its_own_buckets_and_consumers(
    users: dict[str, User],
) -> None:
    s = Subjects(NAMESPACE)
    api = "$JS.API"
    denied = [
        # Workers hold strangers' code and pages: no request records, no histories, no results.
        ("workers", f"{api}.STREAM.MSG.GET.KV_{s.sessions_bucket}"),
        ("workers", f"{api}.STREAM.MSG.GET.KV_{s.status_bucket}"),
        ("workers", f"{api}.STREAM.MSG.GET.KV_{s.requests_bucket}"),
        ("workers", f"{api}.DIRECT.GET.KV_{s.sessions_bucket}.$KV.{s.sessions_bucket}.x"),
        ("workers", f"$KV.{s.status_bucket}.some-request"),
        ("evaluator", f"{api}.STREAM.MSG.GET.KV_{s.sessions_bucket}"),
        ("gateway", f"{api}.STREAM.MSG.GET.KV_{s.requests_bucket}"),
        ("gateway", f"$KV.{s.requests_bucket}.some-request"),
        ("frontline", f"$KV.{s.requests_bucket}.some-request"),
        # Nobody takes another's work from the stream, or reads it by sequence.
        ("workers", f"{api}.CONSUMER.MSG.NEXT.{s.work_stream}.{durable_name(s, 'frontline')}"),
        ("gateway", f"{api}.CONSUMER.MSG.NEXT.{s.work_stream}.{durable_name(s, 'evaluator')}"),
        ("evaluator", f"{api}.CONSUMER.MSG.NEXT.{s.work_stream}.{durable_name(s, 'worker_email')}"),
        ("workers", f"{api}.STREAM.MSG.GET.{s.work_stream}"),
        ("gateway", f"{api}.STREAM.MSG.GET.{s.work_stream}"),
        # Watching a bucket is reading it.
        ("workers", f"{api}.CONSUMER.CREATE.KV_{s.sessions_bucket}"),
    ]
    for user, subject in denied:
        assert await users[user].denied(subject), f"{user} could {subject}"
    for user, subject in (
        ("workers", ">"),
        ("workers", "_INBOX.>"),
        ("gateway", "_INBOX_workers.>"),
        ("frontline", s.out_all),
        ("evaluator", s.request_cancel),
        ("workers", s.chat_requested),
        ("gateway", s.worker_run_all),
    ):
        assert await users[user].refused_subscription(subject), f"{user} heard {subject}"


async def test_only_a_requests_own_producers_may_publish_on_its_push_subjects(
    users: dict[str, User],
) -> None:
    """The push outbox POSTs what it holds to clients' webhooks: a role that could publish
    there could make Sidekick tell a client a task ended that never did."""
    s = Subjects(NAMESPACE)
    js = users[ADMIN].nc.jetstream()
    before = (await js.stream_info(s.push_stream)).state.messages
    denied = [
        *(("evaluator", s.push("r1", what)) for what in PUSHED),
        *(("workers", s.push("r1", what)) for what in PUSHED if what != "progress"),
        ("gateway", s.push("r1", "progress")),
        ("gateway", s.push("r1", "clarification")),
        ("frontline", s.push("r1", "clarification")),
        ("orchestrator", f"{s.namespace}.push.r1.text"),  # only the kinds the outbox takes
        ("orchestrator", f"{s.namespace}.push.r1"),
        # Nobody but the gateways takes (or drops, by acking) what the outbox holds.
        *(
            (other, f"$JS.API.CONSUMER.MSG.NEXT.{s.push_stream}.{durable_name(s, 'push')}")
            for other in SERVICES
            if other != "gateway"
        ),
        ("workers", f"$JS.ACK.{s.push_stream}.{durable_name(s, 'push')}.1.1.1.1.0"),
        ("workers", f"$JS.API.CONSUMER.DELETE.{s.push_stream}.{durable_name(s, 'push')}"),
        ("gateway", f"$JS.API.CONSUMER.DELETE.{s.push_stream}.{durable_name(s, 'push')}"),
    ]
    for user, subject in denied:
        assert await users[user].denied(subject), f"{user} could publish {subject}"
    assert await users["workers"].refused_subscription(s.push_all), "workers heard the outbox"
    assert (await js.stream_info(s.push_stream)).state.messages == before  # none got in
    # Each role's own: stored in the outbox.
    allowed = [
        ("orchestrator", s.push("r1", "clarification")),
        ("frontline", s.push("r1", "completed")),
        ("workers", s.push("r1", "progress")),
        ("gateway", s.push("r1", "cancelled")),
    ]
    for user, subject in allowed:
        ack = await users[user].nc.jetstream().publish(subject, b"{}", timeout=5)
        assert ack.stream == s.push_stream, (user, subject)
    assert (await js.stream_info(s.push_stream)).state.messages == before + len(allowed)


def test_sidekick_up_gives_each_service_its_own_password_and_never_shows_one(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SIDEKICK_", "OPENAI_"))}
    env.update(llm_env(fake_llm.base_url))
    # Canaries: which process may hold which key.
    env.update(
        {
            "BRAVE_SEARCH_API_KEY": "canary-brave",
            "SENDGRID_API_KEY": "canary-sendgrid",
            "SIDEKICK_EVALUATOR_LLM_API_KEY": "canary-evaluator",
            "SIDEKICK_TOKEN": "canary-client-token",
        }
    )
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
        environs = {}
        for pid in children(proc.pid):
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if b"services.cli" in cmd:
                environ = dict(
                    item.split("=", 1)
                    for item in Path(f"/proc/{pid}/environ").read_text().split("\0")
                    if "=" in item
                )
                service = cmd[cmd.index(b"run") + 1].decode()
                urls[service] = environ["SIDEKICK_NATS_URL"]
                environs[service] = environ
        assert sorted(urls) == sorted(SERVICES)
        passwords = set()
        for service, url in urls.items():
            assert "@" not in url, "the login travels apart from the URL"
            environ = environs[service]
            assert environ[variable("USER", service)] == service
            passwords.add(environ[variable("PASSWORD", service)])
            others = [o for o in SERVICES if o != service and variable("PASSWORD", o) in environ]
            assert not others, f"{service} holds the NATS password of {others}"
            assert variable("PASSWORD", ADMIN) not in environ
        assert len(passwords) == len(SERVICES), "one password per service"
        # Each process holds only its role's keys.
        holders = {
            key: {svc for svc, e in environs.items() if key in e}
            for key in (
                "BRAVE_SEARCH_API_KEY",
                "SENDGRID_API_KEY",
                "SIDEKICK_LLM_API_KEY",
                "SIDEKICK_EVALUATOR_LLM_API_KEY",
                "SIDEKICK_TOKEN",
            )
        }
        assert holders["BRAVE_SEARCH_API_KEY"] == {"workers"}
        assert holders["SENDGRID_API_KEY"] == {"workers"}
        assert holders["SIDEKICK_LLM_API_KEY"] == set(SERVICES) - {"gateway"}
        assert holders["SIDEKICK_EVALUATOR_LLM_API_KEY"] == {"evaluator"}
        assert holders["SIDEKICK_TOKEN"] == set()
        # The nats-server's own variables (every user's password) reach no service.
        assert not [e for e in environs.values() if "SIDEKICK_NATS_PASSWORD_" in "".join(e)]
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
