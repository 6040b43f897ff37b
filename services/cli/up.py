"""`sidekick up`: an embedded nats-server and every service as its own OS process, each
restarted when it dies (the nats-server on the same port and store, so the services reconnect
and nothing acknowledged is lost), all stopped cleanly on Ctrl-C or SIGTERM: the services
first, the nats-server last. One log line says each restart."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from services.cli.banner import banner
from services.cli.bootstrap import run_bootstrap
from services.cli.localmodel import LocalModelMissing
from services.runtime.base.children import die_with_parent
from services.runtime.base.logs import log_format, setup_logging
from services.runtime.base.readyz import wait_ok
from services.runtime.base.settings import Settings
from services.runtime.bus.natsauth import ADMIN, SERVICES, Credentials, write_config
from services.runtime.bus.natslogin import Login, variable
from services.runtime.bus.natsserver import NatsServer
from services.runtime.walls.secrets import (
    LOCAL_MODEL,
    SecretList,
    nats_server_environment,
)
from services.workers.settings import WorkerSettings
from services.workers.tools.settings import ToolsSettings

log = logging.getLogger("sidekick.up")

# Every secret and who may hold it, from the settings classes of every process `up` starts.
SECRETS = SecretList.of((Settings, WorkerSettings, ToolsSettings))


def _backoff(restarts: list[float]) -> float:
    """Record a restart now and return the delay before it: 0.5 s, doubling within a minute."""
    now = time.monotonic()
    restarts[:] = [t for t in restarts if now - t < 60] + [now]
    return min(0.5 * 2.0 ** (len(restarts) - 1), 10.0)


def own_logins(creds: Credentials | None) -> dict[str, dict[str, str]]:
    """Each user's login variables when `up` made the users (its embedded server); else none
    (each service reads its own SIDEKICK_<SERVICE>_NATS_* from the environment)."""
    logins: dict[str, dict[str, str]] = {user: {} for user in (*SERVICES, ADMIN)}
    if creds is not None:
        for user, password in creds.passwords.items():
            logins[user] = {variable("USER", user): user, variable("PASSWORD", user): password}
    return logins


def say_who_connects(nats_url: str) -> None:
    """On a server of the operator's: warn of each service that has no NATS user of its own."""
    shared = Login.from_env(nats_url, os.environ)
    for name in SERVICES:
        own = {k: v for k, v in os.environ.items() if k.startswith(variable("", name))}
        if own:
            continue
        how = f"as the shared {shared.who}" if not shared.anonymous else "without a login"
        log.warning(
            "%s has no NATS user of its own (%s and %s, or %s): it connects %s, with every "
            "right that login has (docs/operations.md: per-service users)",
            name,
            variable("USER", name),
            variable("PASSWORD", name),
            variable("CREDS", name),
            how,
        )


@dataclass
class Child:
    name: str
    args: list[str]
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = None
    restarts: list[float] = field(default_factory=list)
    log: Path | None = None  # where its output goes (None: this terminal)

    def start(self) -> None:
        # Its own session: a terminal's Ctrl-C reaches only `sidekick up`, which stops the
        # children in order (the services before the nats-server they need to stop cleanly).
        out = open(self.log, "ab") if self.log is not None else None  # noqa: SIM115
        try:
            self.process = subprocess.Popen(
                self.args,
                env=self.env,
                preexec_fn=die_with_parent,
                start_new_session=True,
                stdout=out,
                stderr=subprocess.STDOUT if out is not None else None,
            )
        finally:
            if out is not None:
                out.close()

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


@dataclass(kw_only=True, eq=False)
class Supervisor:
    """`sidekick up`: the nats-server (unless `nats_url` names one) and the five services,
    each restarted when it dies."""

    data_dir: Path
    port: int
    nats_url: str | None
    workers: str | None
    host: str = "127.0.0.1"
    local_model: bool = False
    nats: NatsServer | None = field(default=None, init=False)
    nats_restarts: list[float] = field(default_factory=list, init=False)
    children: list[Child] = field(default_factory=list, init=False)
    stopping: bool = field(default=False, init=False)
    hurry: bool = field(default=False, init=False)  # a second Ctrl-C: do not wait for children

    def _env(self, service: str, nats_url: str, login: dict[str, str]) -> dict[str, str]:
        # Built for this child: the configuration, and of the secrets only its role's (its own
        # NATS login among them: SIDEKICK_<SERVICE>_NATS_*, never another service's).
        env = SECRETS.environment(service, os.environ)
        env.update(login)
        env["SIDEKICK_NATS_URL"] = nats_url
        env["SIDEKICK_GATEWAY_PORT"] = str(self.port)
        env["SIDEKICK_GATEWAY_HOST"] = self.host
        env["SIDEKICK_DATA_DIR"] = str(self.data_dir)
        if self.workers:
            env["SIDEKICK_WORKERS"] = self.workers
        return env

    def start_local_model(self) -> None:
        """--local-model: the tiny model's two servers (chat, embeddings) as supervised
        children, logging to the data dir, and every role pointed at them (services/cli/
        localmodel.py). Fails with what to install when the `local` extra is missing."""
        from services.cli.localmodel import LocalModel

        local = LocalModel()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        for name, args in local.commands().items():
            log_file = self.data_dir / f"{name}.log"
            child = Child(name, args, SECRETS.environment(LOCAL_MODEL, os.environ), log=log_file)
            child.start()
            self.children.append(child)
        local.wait_ready({c.name: c.process for c in self.children if c.process is not None})
        os.environ.update(local.env())
        log.info(
            "local model (SmolLM2-135M, a tiny demonstration model) on %s, embeddings on %s; "
            "their logs are in %s",
            local.chat_url,
            local.embeddings_url,
            self.data_dir,
        )

    def start(self) -> str:
        if self.local_model:
            self.start_local_model()
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
                # Only what its config reads: the passwords made for this run (no key of ours).
                env=nats_server_environment(os.environ, creds.env()),
            ).start()
            nats_url = self.nats.url
            log.info(
                "nats-server (JetStream, data in %s) on %s; each service has its own user "
                "(see docs/nats-security.md)",
                self.data_dir,
                nats_url,
            )
        logins = own_logins(creds)
        if creds is None:
            say_who_connects(nats_url)
        # Streams, buckets and consumers are made here, as the admin user; no service may.
        admin = Login.from_env(nats_url, {**os.environ, **logins[ADMIN]}, ADMIN)
        try:
            asyncio.run(run_bootstrap(admin, Settings()))
        except Exception as exc:
            if creds is not None:
                raise
            # A server of the operator's: its admin may have run `sidekick bootstrap` already.
            log.warning(
                "could not create the streams, buckets and consumers (%r); the services wait "
                "for them: run `sidekick bootstrap` with the NATS admin user",
                exc,
            )
        for name in SERVICES:
            env = self._env(name, nats_url, logins[name])
            child = Child(name, [sys.executable, "-m", "services.cli", "run", name], env)
            child.start()
            self.children.append(child)
        return nats_url

    def wait_ready(self, timeout: float = 90.0) -> bool:
        """Until the gateway's /readyz says every service answered over the bus."""
        url = f"http://{self.host}:{self.port}/readyz"
        return wait_ok(url, timeout, probe_timeout=5, still=lambda: not self.stopping)

    def _keep_nats(self) -> None:
        nats = self.nats
        if nats is None or nats.process is None or nats.process.poll() is None:
            return
        delay = _backoff(self.nats_restarts)
        log.warning(
            "nats-server exited with code %s; restarting it in %.1fs on %s with the same store "
            "(the services reconnect; acknowledged work is on disk)",
            nats.process.returncode,
            delay,
            nats.url,
        )
        time.sleep(delay)
        if self.stopping:
            return
        try:
            nats.start()
        except RuntimeError as exc:
            log.warning("nats-server did not start again (%s); trying again", exc)
            return
        log.info("nats-server is back on %s", nats.url)

    def supervise(self) -> None:
        while not self.stopping:
            self._keep_nats()
            for child in self.children:
                if child.process is not None and not child.alive and not self.stopping:
                    delay = _backoff(child.restarts)
                    log.warning(
                        "%s exited with code %s; restarting in %.1fs",
                        child.name,
                        child.process.returncode,
                        delay,
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
            while child.process.poll() is None and not self.hurry:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            if child.process.poll() is None:
                log.warning("%s did not stop in time; killing it", child.name)
                child.process.kill()
                child.process.wait()
        if self.nats is not None:
            self.nats.stop()


def up(sup: Supervisor) -> int:
    setup_logging("up")

    def on_signal(signum: int, _frame: object) -> None:
        if sup.stopping:
            sup.hurry = True
        sup.stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    started = time.monotonic()
    try:
        try:
            sup.start()
        except (LocalModelMissing, TimeoutError, RuntimeError) as exc:
            if not sup.local_model:
                raise
            log.error("--local-model: %s", exc)
            return 1
        if sup.wait_ready():
            lines = banner(
                host=sup.host,
                port=sup.port,
                took=time.monotonic() - started,
                settings=Settings(),
                env=os.environ,
            )
            if log_format() == "json":
                for line in lines:
                    log.info("%s", line.strip())
            else:
                print("\n".join(lines), flush=True)
        elif not sup.stopping:
            log.warning(
                "not every service answered over the bus in 90s (GET /readyz says which); "
                "still trying"
            )
        sup.supervise()
    finally:
        log.info("stopping Sidekick...")
        sup.stop()
        log.info("stopped")
    return 0
