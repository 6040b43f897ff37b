"""Running Sidekick's services as real OS processes against the test session's nats-server
(`System`; a test starts one through tests/support/systems.py), running `sidekick` commands as a
user does, and talking to the gateway like a client does."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import websockets

from services.gateway.ws.frames import ROUTED_TEXT
from services.runtime.base import children
from services.runtime.base.children import (
    SERVICES,
    ServiceProcesses,
    base_env,
    die_with_parent,
    free_port,
    replica_names,
    role_models,
    service_of,
)
from tests.support.lockednats import users_for

ROOT = Path(__file__).resolve().parents[2]
__all__ = [
    "ROOT",
    "SERVICES",
    "Client",
    "Conversation",
    "LoopbackGateway",
    "System",
    "bootstrap_process",
    "free_port",
    "http_get",
    "llm_env",
    "sidekick",
]


def llm_env(base_url: str) -> dict[str, str]:
    return {
        "SIDEKICK_LLM_BASE_URL": base_url,
        "SIDEKICK_LLM_API_KEY": "test-key",
        **role_models("fake"),
    }


def sidekick(
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 120,
    input: str | None = None,
    check: bool = False,
) -> subprocess.CompletedProcess[str]:
    """`sidekick ARGS` as a user runs it from the checkout, to its end, its output captured as
    text (`env`: the whole environment, this process's when None)."""
    return subprocess.run(
        [sys.executable, "-m", "services.cli", *args],
        input=input,
        env=env,
        timeout=timeout,
        cwd=str(ROOT),
        capture_output=True,
        text=True,
        check=check,
    )


def http_get(url: str, timeout: float = 2) -> tuple[int, str]:
    """GET `url`: its status and body, an error status included."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return int(resp.status), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode()


def bootstrap_process(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`sidekick bootstrap` run to its end with `env`; its output captured."""
    return children.bootstrap_process(env, ROOT)


class LoopbackGateway:
    """A gateway listening on 127.0.0.1:`gateway_port`, and where a client reaches it."""

    gateway_port: int

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.gateway_port}/ws"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.gateway_port}"


@dataclass
class System(LoopbackGateway, ServiceProcesses):
    """The five services, each its own process, in their own namespace on a shared server.
    Started by `Systems.run` (tests/support/systems.py), which stops them after."""

    nats_url: str
    env: dict[str, str]
    log_dir: Path
    namespace: str = field(default_factory=lambda: "t" + uuid.uuid4().hex[:10])
    gateway_port: int = field(default_factory=free_port)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    # Each service's own NATS URL, when the server is locked (tests/support/lockednats.py).
    service_urls: dict[str, str] = field(default_factory=dict)
    # Health/metrics port of each non-gateway service, kept across restarts.
    ops_ports: dict[str, int] = field(default_factory=dict)
    # The port of each gateway started by `start_all(gateways=...)`, the first `gateway_port`.
    gateway_ports: list[int] = field(default_factory=list)
    root = ROOT
    ready_timeout = 60.0  # seconds `start_all` waits for every service

    def ops_url(self, name: str) -> str:
        """Where one service serves /metrics, /healthz and /readyz (the gateway on its own
        port, others on ops)."""
        port = self.gateway_port if name == "gateway" else self.ops_ports[name]
        return f"http://127.0.0.1:{port}"

    def metrics_url(self, name: str) -> str:
        return f"{self.ops_url(name)}/metrics"

    def service_env(self) -> dict[str, str]:
        env = base_env(self.nats_url, self.namespace, self.gateway_port)
        env.update(
            {
                "SIDEKICK_ACK_WAIT": "5",
                "SIDEKICK_HEARTBEAT_INTERVAL": "1",
                "SIDEKICK_LLM_MAX_RETRIES": "1",
                "SIDEKICK_LLM_TIMEOUT": "20",
                # Tests that exercise the semantic cache turn it on for their own system.
                "SIDEKICK_CACHE_ENABLED": "false",
                "SIDEKICK_SWEEP_INTERVAL": "0.5",
            }
        )
        env.update(self.env)
        return env

    def log_path(self, name: str) -> Path:
        return self.log_dir / f"{self.namespace}-{name}.log"

    def launch_env(self, service: str) -> dict[str, str]:
        """What one process of `service` is started with."""
        env = self.service_env()
        if service in self.service_urls:
            env["SIDEKICK_NATS_URL"] = self.service_urls[service]
        return env

    def launch(self, name: str) -> None:
        service, _, port = name.partition(":")  # "gateway:PORT": another gateway replica
        service = service_of(service)  # "orchestrator.2": another replica
        env = self.launch_env(service)
        if port:
            env["SIDEKICK_GATEWAY_PORT"] = port
        elif name != "gateway":
            env["SIDEKICK_OPS_PORT"] = str(self.ops_ports.setdefault(name, free_port()))
        # A killed test run leaves no services behind.
        self.spawn(name, service, env, die_with_parent)

    def bootstrap_env(self) -> dict[str, str]:
        return self.service_env()

    def bootstrap(self) -> None:
        """What `sidekick up` does first: the streams, buckets and consumers, as admin."""
        done = bootstrap_process(self.bootstrap_env())
        if done.returncode != 0:
            raise RuntimeError(f"`sidekick bootstrap` failed:\n{done.stdout}\n{done.stderr}")

    def logins(self) -> dict[str, str]:
        """Each service's own NATS URL where the server is locked (tests/support/lockednats.py)."""
        return users_for(self.nats_url, self.namespace) or {}

    def start_all(
        self,
        timeout: float | None = None,
        services: tuple[str, ...] = SERVICES,
        replicas: int = 1,
        gateways: int = 1,
    ) -> Self:
        """Start `services`; with `replicas`, that many processes of each service but the
        gateway (`orchestrator.2`, ...), and `gateways` gateways (see `gateway_urls`)."""
        self.service_urls = self.logins()
        self.bootstrap()
        names = list(services)
        if replicas > 1 or gateways > 1:
            self.gateway_ports = [self.gateway_port] + [free_port() for _ in range(gateways - 1)]
            names = [
                n for n in replica_names(replicas, self.gateway_ports) if service_of(n) in services
            ]
        for name in names:
            self.launch(name)
        self.wait_ready(timeout or self.ready_timeout)
        return self

    @property
    def gateway_urls(self) -> list[str]:
        """The WebSocket URL of each gateway (one unless started with `gateways`)."""
        return [f"ws://127.0.0.1:{port}/ws" for port in self.gateway_ports or [self.gateway_port]]

    def replica(self) -> str:
        """Start another gateway replica of this system; its base URL once it is ready."""
        port = free_port()
        self.restart(f"gateway:{port}")
        return f"http://127.0.0.1:{port}"

    async def ask(self, message: str, **extra: Any) -> Conversation:
        """One request on a socket of its own (events mode), up to its end frame."""
        async with Client(self.ws_url, events=True) as client:
            return await client.ask(message, **extra)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self.stop_services()


@dataclass
class Conversation:
    """What one request produced on the socket, in order."""

    frames: list[dict[str, Any]]

    @property
    def text(self) -> str:
        return "".join(
            f["on_chat_model_stream"] for f in self.frames if "on_chat_model_stream" in f
        )

    @property
    def answer(self) -> str:
        """The text without what an old client is sent first for a routed request (the
        TypeScript seed's "Processing your request..." and a blank line)."""
        return self.text.removeprefix(f"{ROUTED_TEXT}\n\n")

    @property
    def chunks(self) -> list[str]:
        return [f["on_chat_model_stream"] for f in self.frames if "on_chat_model_stream" in f]

    @property
    def errors(self) -> list[dict[str, Any]]:
        return [f["error"] for f in self.frames if "error" in f]

    @property
    def end(self) -> dict[str, Any]:
        return next(f for f in self.frames if "on_chat_model_end" in f)

    def only_error(self, code: str) -> str:
        """The message of the request's one error frame, whose code must be `code`."""
        (error,) = self.errors
        assert error["code"] == code, error
        return str(error["message"])

    def progress(self, stage: str) -> list[dict[str, Any]]:
        return [f for f in self.frames if f.get("event") == "progress" and f["stage"] == stage]


class Client:
    """A WebSocket client speaking the seed's protocol."""

    def __init__(self, url: str, uuid_: str | None = None, events: bool = False) -> None:
        self.url = url
        self.uuid = uuid_ or uuid.uuid4().hex[:12]
        self.events = events
        self.ws: Any = None

    async def __aenter__(self) -> Client:
        self.ws = await websockets.connect(self.url, max_size=None)
        await self.send({"init": True, "uuid": self.uuid, "events": self.events})
        if self.events:
            ready = await self.recv()
            assert ready.get("event") == "ready", ready
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.ws.close()

    async def send(self, frame: dict[str, Any] | str) -> None:
        await self.ws.send(frame if isinstance(frame, str) else json.dumps(frame))

    async def recv(self, timeout: float = 60.0) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(await asyncio.wait_for(self.ws.recv(), timeout))
        return data

    async def until_end(self, timeout: float = 90.0) -> Conversation:
        frames = []
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            left = deadline - asyncio.get_running_loop().time()
            frame = await self.recv(max(left, 0.01))
            frames.append(frame)
            if "on_chat_model_end" in frame:
                return Conversation(frames)

    async def ask(self, message: str, **extra: Any) -> Conversation:
        await self.send({"uuid": self.uuid, "message": message, **extra})
        return await self.until_end()
