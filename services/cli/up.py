"""`sidekick up`: an embedded nats-server and every service as its own OS process, restarted
when one dies, all stopped cleanly on Ctrl-C or SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from services.cli.bootstrap import run_bootstrap
from services.runtime import secrets
from services.runtime.natsauth import ADMIN, SERVICES, Credentials, write_config
from services.runtime.natsserver import NatsServer, die_with_parent
from services.runtime.settings import Settings

log = logging.getLogger("sidekick.up")


@dataclass
class Child:
    name: str
    args: list[str]
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = None
    restarts: list[float] = field(default_factory=list)

    def start(self) -> None:
        self.process = subprocess.Popen(self.args, env=self.env, preexec_fn=die_with_parent)

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


class Supervisor:
    def __init__(
        self,
        *,
        data_dir: Path,
        port: int,
        nats_url: str | None,
        workers: str | None,
        host: str = "127.0.0.1",
    ) -> None:
        self.data_dir = data_dir
        self.port = port
        self.host = host
        self.nats_url = nats_url
        self.workers = workers
        self.nats: NatsServer | None = None
        self.children: list[Child] = []
        self.stopping = False

    def _env(self, service: str, nats_url: str) -> dict[str, str]:
        # Built for this child: the configuration, and of the secrets only its role's.
        env = secrets.environment(service, os.environ)
        env["SIDEKICK_NATS_URL"] = nats_url
        env["SIDEKICK_GATEWAY_PORT"] = str(self.port)
        env["SIDEKICK_GATEWAY_HOST"] = self.host
        env["SIDEKICK_DATA_DIR"] = str(self.data_dir)
        if self.workers:
            env["SIDEKICK_WORKERS"] = self.workers
        return env

    def start(self) -> str:
        nats_url = self.nats_url
        creds: Credentials | None = None
        if nats_url is None:
            # Locked down: one NATS user per service, limited to its own subjects, with
            # passwords made for this run, known only to nats-server and that service.
            creds = Credentials.generate((*SERVICES, ADMIN))
            namespace = os.environ.get("SIDEKICK_NAMESPACE", "sidekick")
            config = write_config(self.data_dir / "nats.conf", namespace, admin=True)
            self.nats = NatsServer(
                store_dir=self.data_dir / "jetstream",
                config_file=config,
                env={**os.environ, **creds.env()},
            ).start()
            nats_url = self.nats.url
            print(
                f"nats-server (JetStream, data in {self.data_dir}) on {nats_url}; "
                "each service has its own user (see docs/nats-security.md)",
                flush=True,
            )
        # Streams, buckets and consumers are made here, as the admin user; no service may.
        admin_url = creds.url(nats_url, ADMIN) if creds else nats_url
        try:
            asyncio.run(run_bootstrap(admin_url, Settings()))
        except Exception as exc:
            if creds is not None:
                raise
            # A server of the operator's: its admin may have run `sidekick bootstrap` already.
            print(
                f"could not create the streams, buckets and consumers ({exc!r}); the services "
                "wait for them: run `sidekick bootstrap` with the NATS admin user",
                flush=True,
            )
        for name in SERVICES:
            env = self._env(name, creds.url(nats_url, name) if creds else nats_url)
            child = Child(name, [sys.executable, "-m", "services.cli", "run", name], env)
            child.start()
            self.children.append(child)
        return nats_url

    def wait_ready(self, timeout: float = 60.0) -> bool:
        url = f"http://{self.host}:{self.port}/readyz"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.stopping:
            try:
                with urllib.request.urlopen(url, timeout=1) as resp:
                    if resp.status == 200:
                        return True
            except OSError:
                pass
            time.sleep(0.2)
        return False

    def supervise(self) -> None:
        while not self.stopping:
            for child in self.children:
                if child.process is not None and not child.alive and not self.stopping:
                    code = child.process.returncode
                    now = time.monotonic()
                    child.restarts = [t for t in child.restarts if now - t < 60] + [now]
                    delay = min(2 ** (len(child.restarts) - 1) * 0.5, 10.0)
                    print(
                        f"{child.name} exited with code {code}; restarting in {delay:.1f}s",
                        flush=True,
                    )
                    time.sleep(delay)
                    if not self.stopping:
                        child.start()
            time.sleep(0.3)

    def stop(self) -> None:
        self.stopping = True
        for child in self.children:
            if child.alive and child.process is not None:
                child.process.terminate()
        deadline = time.monotonic() + 10
        for child in self.children:
            if child.process is None:
                continue
            try:
                child.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.process.kill()
                child.process.wait()
        if self.nats is not None:
            self.nats.stop()


def up(*, data_dir: Path, port: int, nats_url: str | None, workers: str | None, host: str) -> int:
    sup = Supervisor(data_dir=data_dir, port=port, nats_url=nats_url, workers=workers, host=host)

    def on_signal(signum: int, _frame: object) -> None:
        sup.stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    started = time.monotonic()
    try:
        sup.start()
        if sup.wait_ready():
            took = time.monotonic() - started
            print(
                f"Sidekick is up in {took:.1f}s: http://{host}:{port}  (WebSocket "
                f"ws://{host}:{port}/ws; try `sidekick chat`). Ctrl-C stops it.",
                flush=True,
            )
        elif not sup.stopping:
            print("the gateway did not become ready in 60s; still trying", flush=True)
        sup.supervise()
    finally:
        print("stopping Sidekick...", flush=True)
        sup.stop()
    return 0
