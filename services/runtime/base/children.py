"""Child processes: a free loopback port to give one, dying with the parent, and stopping
(terminate, then kill what outlives a grace period). And the five services as children of one
process, run from a checkout: what the test harness (tests/support/harness.py) and the bench
(bench/system.py) start, watch, kill, restart and stop. `sidekick up` keeps its own children
alive (services/cli/up.py)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from services.runtime.base.readyz import answers_ok

SERVICES = ("gateway", "frontline", "orchestrator", "evaluator", "workers")


_handed_out: set[int] = set()


def free_port() -> int:
    """A port free on 127.0.0.1 now and never handed out before by this process: the kernel
    may offer a port again as soon as its probe socket closes, and two children given the same
    one race to bind it."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _handed_out:
            _handed_out.add(port)
            return port


def _on_parent_death(sig: signal.Signals) -> None:
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, sig)


def die_with_parent() -> None:
    """Child processes get SIGTERM if their parent dies, so nothing is orphaned (Linux)."""
    _on_parent_death(signal.SIGTERM)


def killed_with_parent() -> None:
    """Children get SIGKILL when the parent dies (Linux), even one stuck in its start-up that
    would sit out a SIGTERM: a bench run never leaves processes behind."""
    _on_parent_death(signal.SIGKILL)


def stop(processes: Iterable[subprocess.Popen[Any]], grace: float = 10.0) -> None:
    """Terminate each one still running, then wait for each up to `grace` seconds; kill one
    that is still there."""
    processes = list(processes)
    for proc in processes:
        if proc.poll() is None:
            proc.terminate()
    for proc in processes:
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def bootstrap_process(env: dict[str, str], root: Path) -> subprocess.CompletedProcess[str]:
    """`sidekick bootstrap` run to its end with `env`; its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "services.cli", "bootstrap"],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
    )


def base_env(nats_url: str, namespace: str, gateway_port: int) -> dict[str, str]:
    """This environment without its Sidekick and OpenAI settings, plus where the bus and the
    gateway are, and the per-principal limits off (the harness's and the bench's clients
    share principals; tests of the limits set their own)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SIDEKICK_", "OPENAI_"))}
    env.update(
        {
            "SIDEKICK_NATS_URL": nats_url,
            "SIDEKICK_NAMESPACE": namespace,
            "SIDEKICK_GATEWAY_PORT": str(gateway_port),
            "SIDEKICK_RATE_LIMIT_PER_MINUTE": "0",
            "SIDEKICK_MAX_CONCURRENT_REQUESTS": "0",
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def role_models(prefix: str) -> dict[str, str]:
    """A model name per role (`<prefix>-frontline`, ...), so a fake model knows who asks."""
    roles = ("frontline", "orchestrator", "worker", "evaluator")
    return {f"SIDEKICK_{role.upper()}_LLM_MODEL": f"{prefix}-{role}" for role in roles}


def service_of(name: str) -> str:
    """The service a child runs, from its name: `orchestrator`, a replica `orchestrator.2`,
    or a gateway replica `gateway:<port>`."""
    return name.partition(":")[0].partition(".")[0]


def replica_names(replicas: int, gateway_ports: list[int]) -> list[str]:
    """The children of a system with `replicas` processes of every service but the gateway,
    and a gateway on each of `gateway_ports` after the first (`gateway`)."""
    names = [s for s in SERVICES]
    names += [f"{s}.{n}" for n in range(2, replicas + 1) for s in SERVICES if s != "gateway"]
    return names + [f"gateway:{port}" for port in gateway_ports[1:]]


class ServiceProcesses(ABC):
    """The services of one system as children of this process (`procs`, by name; a replica
    is `<service>.<n>`, a gateway replica `gateway:<port>`), each logging to a file of its
    own. A subclass says where the logs go and how one service is started (`launch`)."""

    procs: dict[str, subprocess.Popen[bytes]]
    gateway_port: int
    root: Path
    # How often a restart looks whether the service is ready (the bench times restarts).
    restart_poll: float = 0.1

    @abstractmethod
    def log_path(self, name: str) -> Path: ...

    @abstractmethod
    def launch(self, name: str) -> None:
        """Start service `name` (`spawn` it with its environment)."""

    def spawn(self, name: str, service: str, env: dict[str, str], preexec: Any) -> None:
        """Run `sidekick run <service>` as `name`, its output appended to its log."""
        with open(self.log_path(name), "ab") as log:
            self.procs[name] = subprocess.Popen(
                [sys.executable, "-m", "services.cli", "run", service],
                env=env,
                cwd=self.root,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=preexec,
            )

    def log(self, name: str) -> str:
        path = self.log_path(name)
        return path.read_text(errors="replace") if path.exists() else ""

    def logs_tail(self) -> str:
        return "\n".join(f"--- {n}\n{self.log(n)[-2000:]}" for n in self.procs)

    def is_ready(self, name: str) -> bool:
        """A gateway when its /readyz answers 200; another service once it logged 'ready'."""
        if name.startswith("gateway"):
            port = name.partition(":")[2] or str(self.gateway_port)
            return answers_ok(f"http://127.0.0.1:{port}/readyz", timeout=1)
        return f"{service_of(name)} ready (pid {self.procs[name].pid})" in self.log(name)

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until every service is ready; an error at once if one exits."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited early:\n{self.log(name)[-3000:]}")
            if all(self.is_ready(n) for n in self.procs):
                return
            time.sleep(0.1)
        raise TimeoutError(f"services did not become ready in {timeout:.0f}s:\n{self.logs_tail()}")

    def kill(self, name: str) -> None:
        """SIGKILL one service (nothing it held is acked: JetStream delivers it again)."""
        proc = self.procs[name]
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def restart(self, name: str, timeout: float = 60.0) -> None:
        """Start a service again (after a kill) and wait until it is ready."""
        self.launch(name)
        deadline = time.monotonic() + timeout
        while not self.is_ready(name):
            if self.procs[name].poll() is not None:
                raise RuntimeError(f"{name} exited as it restarted:\n{self.log(name)[-3000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name} did not restart:\n{self.log(name)[-3000:]}")
            time.sleep(self.restart_poll)

    def stop_services(self) -> None:
        stop(self.procs.values())
