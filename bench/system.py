"""Starting what the benches measure: an embedded nats-server, the fake model and the five
services, each its own OS process started by the bench (so they inherit its raised fd limit and
die with it), plus a sampler of every process's resident memory."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.runtime.base.children import (
    SERVICES,
    ServiceProcesses,
    base_env,
    bootstrap_process,
    free_port,
    killed_with_parent,
    replica_names,
    role_models,
    service_of,
    stop,
)
from services.runtime.bus.natsserver import NatsServer

ROOT = Path(__file__).resolve().parent.parent


def raise_fd_limit(want: int) -> int:
    """Raise this process's open-file limit (children started later inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak RSS) of a process in KiB, from /proc (Linux)."""
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    key, value = line.split(":", 1)
                    out[key] = int(value.split()[0])
    except OSError:
        pass
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used, from /proc/<pid>/stat (Linux)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_snapshot(pids: dict[str, int]) -> dict[str, float]:
    return {name: cpu_seconds(pid) for name, pid in pids.items()}


def cpu_ms_per(before: dict[str, float], after: dict[str, float], n: int) -> dict[str, float]:
    """CPU milliseconds each process spent per request between two snapshots."""
    per = {k: round((after[k] - before.get(k, 0.0)) * 1000 / max(n, 1), 2) for k in after}
    # What Sidekick itself costs: the five services and nats-server (not the client or the model).
    ours = [v for k, v in per.items() if service_of(k) in SERVICES or k == "nats-server"]
    per["sidekick"] = round(sum(ours), 2)
    return per


class RssSampler:
    """Samples VmRSS of named processes every `interval` s; `peaks()` is the largest seen (MiB)
    since the last `reset()`. VmHWM is the kernel's lifetime peak, reported beside it."""

    def __init__(self, pids: dict[str, int], interval: float = 0.25) -> None:
        self.pids = pids
        self.interval = interval
        self._peak: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> RssSampler:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        for name, pid in self.pids.items():
            rss = proc_status(pid).get("VmRSS", 0)
            with self._lock:
                self._peak[name] = max(self._peak.get(name, 0), rss)

    def reset(self) -> None:
        with self._lock:
            self._peak.clear()
        self.sample()

    def peaks(self) -> dict[str, float]:
        self.sample()
        with self._lock:
            return {name: round(kib / 1024, 1) for name, kib in self._peak.items()}

    def current(self) -> dict[str, float]:
        return {n: round(proc_status(p).get("VmRSS", 0) / 1024, 1) for n, p in self.pids.items()}

    def lifetime_peaks(self) -> dict[str, float]:
        return {n: round(proc_status(p).get("VmHWM", 0) / 1024, 1) for n, p in self.pids.items()}

    def stop(self) -> None:
        self._stop.set()


@dataclass
class FakeModel:
    """The bench's fake model server, in its own process."""

    process: subprocess.Popen[str] | None = None
    port: int = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout: float = 20.0) -> FakeModel:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.fake_model", "--port", "0"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=killed_with_parent,
        )
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        line = self.process.stdout.readline()
        if not line.startswith("listening on ") or time.monotonic() > deadline:
            self.stop()
            raise RuntimeError(f"the fake model did not start: {line!r}")
        self.port = int(line.split()[-1])
        return self

    def _call(self, method: str, path: str, payload: dict[str, Any] | None = None) -> Any:
        data = json.dumps(payload).encode() if payload is not None else None
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", data=data, method=method
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def configure(
        self, *, latency_ms: float = 0.0, token_gap_ms: float = 0.0, one_delta: bool = False
    ) -> None:
        config = {"latency_ms": latency_ms, "token_gap_ms": token_gap_ms, "one_delta": one_delta}
        self._call("POST", "/bench/config", config)

    def calls(self) -> dict[str, int]:
        calls: dict[str, int] = self._call("GET", "/bench/stats")["calls"]
        return calls

    def stop(self) -> None:
        if self.process is not None:
            stop([self.process])


@dataclass
class Stack(ServiceProcesses):
    """nats-server, the fake model and the five services, started and stopped together;
    with `replicas`, that many processes of every service but the gateway (`orchestrator.2`,
    ...) and `gateways` gateways, the sessions spread over them (`ws_urls`). `external_nats`:
    a NATS URL to use instead of starting one (its counters are then not read)."""

    replicas: int = 1
    gateways: int = 1
    external_nats: str | None = None
    gateway_ports: list[int] = field(default_factory=list)
    max_concurrency: int = 64
    cache: bool = False
    principals: int = 0  # 0: auth off, every client is `anonymous`
    extra_env: dict[str, str] = field(default_factory=dict)
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="sidekick-bench-")))
    namespace: str = field(default_factory=lambda: "bench" + uuid.uuid4().hex[:8])
    gateway_port: int = field(default_factory=free_port)
    nats: NatsServer | None = None
    model: FakeModel = field(default_factory=FakeModel)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    monitor_port: int = 0
    root: Path = ROOT  # the tree the services run from (bench.ab runs two versions)
    restart_poll = 0.02  # bench.recovery times restarts

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.gateway_port}/ws"

    @property
    def ws_urls(self) -> list[str]:
        """Every gateway's WebSocket URL (session k uses the k-th, modulo their number)."""
        return [f"ws://127.0.0.1:{port}/ws" for port in self.gateway_ports or [self.gateway_port]]

    @property
    def nats_url(self) -> str:
        if self.external_nats is not None:
            return self.external_nats
        assert self.nats is not None
        return self.nats.url

    def pids(self) -> dict[str, int]:
        pids = {name: p.pid for name, p in self.procs.items()}
        if self.nats is not None and self.nats.process is not None:
            pids["nats-server"] = self.nats.process.pid
        if self.model.process is not None:
            pids["fake-model"] = self.model.process.pid
        pids["bench"] = os.getpid()
        return pids

    def token(self, k: int) -> str | None:
        """The bearer token of session k: sessions spread over `principals` users."""
        return f"bench-token-{k % self.principals:06d}" if self.principals else None

    def _tokens_file(self) -> Path:
        path = self.workdir / "tokens.txt"
        lines = [f"bench-token-{i:06d}:user{i:06d}" for i in range(self.principals)]
        path.write_text("\n".join(lines) + "\n")
        return path

    def env(self) -> dict[str, str]:
        env = base_env(self.nats_url, self.namespace, self.gateway_port)
        env.update(
            {
                "SIDEKICK_LLM_BASE_URL": self.model.base_url,
                "SIDEKICK_LLM_API_KEY": "bench-key",
                "SIDEKICK_MAX_CONCURRENCY": str(self.max_concurrency),
                "SIDEKICK_CACHE_ENABLED": "true" if self.cache else "false",
            }
        )
        if self.principals:
            env["SIDEKICK_AUTH_TOKENS_FILE"] = str(self._tokens_file())
        env.update(role_models("bench"))
        env.update(self.extra_env)
        return env

    def start(self, timeout: float | None = None) -> Stack:
        """Start everything; `timeout` (default: 60 s and 10 s per service process, since
        their start-ups share the cores) for the services to be ready."""
        # nats-server's monitoring endpoint gives messages per request (/varz counters).
        if self.external_nats is None:
            self.monitor_port = free_port()
            config = self.workdir / "nats.conf"
            config.write_text(f'http: "127.0.0.1:{self.monitor_port}"\n')
            store = self.workdir / "jetstream"
            self.nats = NatsServer(store_dir=store, config_file=config).start()
        self.model.start()
        # The streams, buckets and consumers, as `sidekick up` makes them before the services.
        bootstrap_process(self.env(), self.root).check_returncode()
        self.gateway_ports = [self.gateway_port] + [free_port() for _ in range(self.gateways - 1)]
        names = replica_names(self.replicas, self.gateway_ports)
        for name in names:
            self.launch(name)
        self.wait_ready(timeout if timeout is not None else 60.0 + 10.0 * len(names))
        return self

    def log_path(self, name: str) -> Path:
        return self.workdir / f"{name}.log"

    def launch(self, name: str) -> None:
        env = self.env()
        if name.startswith("gateway:"):
            env["SIDEKICK_GATEWAY_PORT"] = name.partition(":")[2]
        self.spawn(name, service_of(name), env, killed_with_parent)

    def nats_counters(self) -> dict[str, int]:
        """Messages and bytes nats-server has received (in) and delivered (out) so far."""
        url = f"http://127.0.0.1:{self.monitor_port}/varz"
        with urllib.request.urlopen(url, timeout=5) as resp:
            varz = json.loads(resp.read())
        return {k: int(varz[k]) for k in ("in_msgs", "out_msgs", "in_bytes", "out_bytes")}

    def stop(self, keep_logs: Path | None = None) -> None:
        """Stop everything; the services' logs are copied to `keep_logs` first, if given."""
        self.stop_services()
        self.model.stop()
        if self.nats is not None:
            self.nats.stop()
        if keep_logs is not None:
            keep_logs.mkdir(parents=True, exist_ok=True)
            for log in self.workdir.glob("*.log"):
                shutil.copy(log, keep_logs / log.name)
        shutil.rmtree(self.workdir, ignore_errors=True)
