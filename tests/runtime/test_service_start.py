"""A service started before its NATS server says what it waits for, and stops when asked."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from services.runtime.bus.natsserver import NatsServer
from tests.support.harness import ROOT, bootstrap_process, free_port


def run_service(name: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """`sidekick run NAME`, its output (stdout and stderr) on one pipe."""
    return subprocess.Popen(
        [sys.executable, "-m", "services.cli", "run", name],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def read_until(proc: subprocess.Popen[str], wanted: str, seen: str, deadline: float) -> str:
    """`seen` and the lines `proc` writes after it, up to the one that holds `wanted`."""
    assert proc.stdout is not None
    while wanted not in seen:
        assert proc.poll() is None and time.monotonic() < deadline, seen
        seen += proc.stdout.readline()
    return seen


def test_a_service_without_nats_says_it_is_waiting_and_stops_on_sigterm() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIDEKICK_")}
    env["SIDEKICK_NATS_URL"] = f"nats://user:secret-pw@127.0.0.1:{free_port()}"
    proc = run_service("frontline", env)
    seen = read_until(proc, "waiting for NATS", "", time.monotonic() + 30)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0
    assert "secret-pw" not in seen + out, "the password is never logged"
    assert "stopped while waiting for NATS" in out


def test_a_service_started_before_the_bootstrap_waits_for_it_then_goes_on(
    nats_server: NatsServer,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIDEKICK_")}
    env["SIDEKICK_NATS_URL"] = nats_server.url
    env["SIDEKICK_NAMESPACE"] = "b" + uuid.uuid4().hex[:10]
    env["SIDEKICK_OPS_PORT"] = str(free_port())
    proc = run_service("evaluator", env)
    try:
        deadline = time.monotonic() + 30
        seen = read_until(proc, "waiting for the bus topology", "", deadline)
        booted = bootstrap_process(env)
        assert booted.returncode == 0, booted.stderr
        seen = read_until(proc, "evaluator ready", seen, deadline)
        assert seen.count("waiting for the bus topology") == 1
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=20)


@pytest.mark.fast
def test_no_two_children_are_handed_the_same_port() -> None:
    # The kernel offers a probe's port again soon after; two services handed one port raced to
    # bind it, and one of them exited at start.
    ports = [free_port() for _ in range(3000)]
    assert len(set(ports)) == len(ports)
