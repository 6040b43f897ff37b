"""A real 3-node nats-server cluster on loopback for the test suite: free ports, JetStream stores
in temp dirs, routes authenticated, one NATS user per service (what `sidekick nats-config
--server-name ... --routes ...` writes), and the five services on it as a `ClusterSystem`, each
given its own login apart from the URL (SIDEKICK_<SERVICE>_NATS_USER / _PASSWORD). And what the
cluster tests share: the ends the results stream holds, a message resent until it is taken, and
the fake model's script for a load."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats.js.errors
from nats.aio.client import Client as NATS

from contracts import Subjects
from services.runtime.base.children import die_with_parent, free_port
from services.runtime.bus import natsauth, natscluster
from services.runtime.bus.natsauth import ADMIN, SERVICES, Credentials, new_password
from services.runtime.bus.natslogin import variable
from services.runtime.bus.natsserver import find_binary
from tests.support.fakes.openai_server import FakeOpenAI, Reply
from tests.support.harness import System
from tests.support.scripts import decision, emailing, last_user, verdict


@dataclass
class Node:
    name: str
    directory: Path
    env: dict[str, str]
    port: int = field(default_factory=free_port)
    route_port: int = field(default_factory=free_port)
    http_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.directory / "server.log"

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [str(find_binary()), "-c", str(self.directory / "nats.conf")],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent,
                start_new_session=True,
            )

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        """A clean stop (SIGTERM), as a rolling restart does."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def monitor(self, path: str) -> Any:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}{path}", timeout=2) as r:
            return json.loads(r.read())

    def healthy(self) -> bool:
        """The node is up and its JetStream is current (nats-server's own /healthz)."""
        try:
            return bool(self.monitor("/healthz").get("status") == "ok")
        except OSError:
            return False


@dataclass
class NatsCluster:
    directory: Path
    namespace: str
    size: int = 3
    creds: Credentials = field(default_factory=lambda: Credentials.generate((*SERVICES, ADMIN)))
    route_password: str = field(default_factory=new_password)
    nodes: list[Node] = field(default_factory=list)
    # False: the nodes do not announce each other to clients (`no_advertise`), so a client
    # given one node's URL stays away while that node is down, instead of moving to another.
    advertise: bool = True

    def start(self, timeout: float = 60.0) -> NatsCluster:
        env = {**os.environ, **self.creds.env()}
        env[natsauth.password_variable(natscluster.ROUTE)] = self.route_password
        self.nodes = [Node(f"n{i}", self.directory / f"n{i}", env) for i in range(self.size)]
        routes = [f"nats-route://127.0.0.1:{n.route_port}" for n in self.nodes]
        users = natsauth.render(self.namespace, admin=True, passwords=self.creds.passwords)
        for node in self.nodes:
            node.directory.mkdir(parents=True, exist_ok=True)
            text = natscluster.render_node(
                natscluster.Node(
                    server_name=node.name,
                    cluster_name="sidekick-test",
                    routes=routes,
                    cluster_listen=f"127.0.0.1:{node.route_port}",
                    listen=f"127.0.0.1:{node.port}",
                    http=f"127.0.0.1:{node.http_port}",
                    store_dir=str(node.directory / "js"),
                    route_user=natscluster.ROUTE,
                    route_password=self.route_password,
                )
            )
            if not self.advertise:
                text = text.replace("cluster {\n", "cluster {\n  no_advertise: true\n", 1)
            natscluster.write(node.directory / "nats.conf", text + "\n" + users)
        for node in self.nodes:
            node.start()
        self.wait_healthy(timeout)
        return self

    def wait_healthy(self, timeout: float = 60.0) -> float:
        """Until every live node is healthy; the seconds it took."""
        began = time.monotonic()
        while not all(n.healthy() for n in self.nodes if n.alive):
            if time.monotonic() - began > timeout:
                raise TimeoutError(f"cluster not healthy:\n{self.logs_tail()}")
            time.sleep(0.1)
        return time.monotonic() - began

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    @property
    def url(self) -> str:
        """Every node, comma-separated (as SIDEKICK_NATS_URL takes it)."""
        return ",".join(n.url for n in self.nodes)

    def login_env(self, user: str) -> dict[str, str]:
        """`user`'s login, apart from the URL, in the variables a service reads."""
        return {
            variable("USER", user): user,
            variable("PASSWORD", user): self.creds.passwords[user],
        }

    @asynccontextmanager
    async def admin(self, nodes: list[Node] | None = None) -> AsyncIterator[NATS]:
        """The admin, connected to `nodes` (every node by default), reconnecting for ever."""
        nc = NATS()
        await nc.connect(
            servers=[n.url for n in nodes or self.nodes],
            user=ADMIN,
            password=self.creds.passwords[ADMIN],
            max_reconnect_attempts=-1,
            reconnect_time_wait=1,
            error_cb=_quiet,
        )
        try:
            yield nc
        finally:
            await nc.close()

    def admin_url(self, node: Node | None = None) -> str:
        return self.creds.url((node or self.nodes[0]).url, ADMIN)

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    def meta_leader(self) -> Node:
        for node in self.nodes:
            if node.alive:
                leader = node.monitor("/jsz").get("meta_cluster", {}).get("leader")
                if leader:
                    return self.node(leader)
        raise RuntimeError("no meta leader")

    def connected(self, nodes: list[Node] | None = None) -> dict[str, str]:
        """Which node each service's connection is on (from the /connz of `nodes`, every live
        node by default)."""
        found = {}
        for node in nodes or self.nodes:
            if not node.alive:
                continue
            for conn in node.monitor("/connz?limit=4096").get("connections", []):
                name = str(conn.get("name", ""))
                if name.startswith("sidekick-") and name != "sidekick-login-check":
                    found[name.removeprefix("sidekick-")] = node.name
        return found

    def logs_tail(self) -> str:
        parts = []
        for node in self.nodes:
            text = node.log_path.read_text(errors="replace") if node.log_path.exists() else ""
            parts.append(f"--- {node.name}\n{text[-1500:]}")
        return "\n".join(parts)


@dataclass
class ClusterSystem(System):
    """The five services on a cluster: SIDEKICK_NATS_URL lists servers (`nats_url`, or the
    service's own list in `service_urls`), and each service has its own user, given apart from
    the URL; streams and buckets at 3 replicas."""

    cluster: NatsCluster | None = None
    ready_timeout = 90.0

    def service_env(self) -> dict[str, str]:
        env = super().service_env()
        env["SIDEKICK_STREAM_REPLICAS"] = "3"
        return env

    def launch_env(self, service: str) -> dict[str, str]:
        assert self.cluster is not None
        return {**super().launch_env(service), **self.cluster.login_env(service)}

    def bootstrap_env(self) -> dict[str, str]:
        assert self.cluster is not None
        env = {**self.service_env(), **self.cluster.login_env(ADMIN)}
        env["SIDEKICK_NATS_URL"] = self.cluster.url
        return env

    def logins(self) -> dict[str, str]:
        """The URLs each service was given (the cluster's users are in the environment)."""
        return self.service_urls


async def _quiet(_: Exception) -> None:
    pass


async def stored_ends(nc: NATS, namespace: str, request_ids: list[str]) -> dict[str, int]:
    """How many ends the results stream holds for each request, once it holds one for each
    (or after 60 s). A client may see an end before the stream holds it: while the stream has
    no leader, a publish reaches the gateways (core subscribers) but is not stored, and the
    publisher, given no ack, publishes it again (same dedupe key) once the stream answers. Nor
    can the stream be read while it has no leader (JetStream answers 503, as after a frozen
    node wakes): it is read again, until the same deadline."""
    deadline = time.monotonic() + 60
    while True:
        try:
            finals = await finals_by_request(nc, namespace)
        except nats.js.errors.ServiceUnavailableError:
            finals = Counter()  # none readable yet
        ours = {rid: finals[rid] for rid in request_ids}
        if all(n >= 1 for n in ours.values()) or time.monotonic() > deadline:
            return ours
        await asyncio.sleep(1)


async def finals_by_request(nc: NATS, namespace: str, prefix: str = "") -> Counter[str]:
    """How many terminal events the results stream holds per request (of those whose id starts
    with `prefix`)."""
    js = nc.jetstream()
    stream = Subjects(namespace).results_stream
    info = await js.stream_info(stream)
    counts: Counter[str] = Counter()
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        msg = await js.get_msg(stream, seq)
        data = json.loads(msg.data or b"{}")
        final = data.get("kind") in ("request.completed", "request.failed", "request.cancelled")
        if final and str(data.get("request_id", "")).startswith(prefix):
            counts[data["request_id"]] += 1
    return counts


async def send_until_taken(
    client: Any, text: str, timeout: float, tries: int = 5
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Send `text` on the socket until it is taken (at most `tries` times): resent after a
    refusal with `unavailable` (the gateway's "please retry" while the bus does not answer yet).
    The turn's end frame, and every error frame seen."""
    refusals: list[dict[str, Any]] = []
    for _ in range(tries):
        await client.send({"uuid": client.uuid, "message": text})
        while "on_chat_model_end" not in (frame := await client.recv(timeout)):
            if "error" in frame:
                refusals.append(frame["error"])
        retry = refusals[-1:] and refusals[-1].get("code") == "unavailable"
        if frame.get("status") not in (None, "rejected") or not retry:
            return frame, refusals
        await asyncio.sleep(2)
    raise AssertionError(f"{text!r} was refused {tries} times: {refusals}")


def load_script(fake: FakeOpenAI, hold: threading.Event, tag: str, weather: bool = False) -> None:
    """The fake model for a load on a cluster: every request routed; `email report #N ...` an
    email to `{tag}-N@example.com`, anything else GENERAL; the worker's calls wait for `hold`.
    With `weather`, a request about the weather is not held, and the evaluator asks it for its
    city once (the load's request parked on a question)."""
    asked: set[str] = set()

    def frontline(body: dict[str, Any]) -> Any:
        return Reply(json.dumps({"route_to_orchestrator": True, "reason": "work"}))

    def orchestrator(body: dict[str, Any]) -> Any:
        text = last_user(body)
        task = text.split("\n")[1] if "\n" in text else text
        chosen = emailing(text, tag + "-{n}@example.com") or decision("GENERAL", task, "an answer")
        return Reply(json.dumps(chosen))

    def worker(body: dict[str, Any]) -> Any:
        wait = None if weather and "weather" in json.dumps(body) else hold
        if body.get("response_format"):
            draft = {"subject": "Report", "body": "Hello, it is ready. Bye"}
            return Reply(json.dumps(draft), wait=wait)
        return Reply("Answer to: " + last_user(body).split("\n")[0], wait=wait)

    def evaluator(body: dict[str, Any]) -> Any:
        text = json.dumps(body)
        if weather and "weather" in text and "Lisbon" not in text and tag not in asked:
            asked.add(tag)
            question = "Which city?"
            return Reply(
                json.dumps(
                    verdict(False, 20, question, user_input_needed=True, questions=[question])
                )
            )
        return Reply(json.dumps(verdict(True, 90, "ok")))

    fake.script("fake-frontline", frontline)
    fake.script("fake-orchestrator", orchestrator)
    fake.script("fake-worker", worker)
    fake.script("fake-evaluator", evaluator)
