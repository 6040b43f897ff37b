"""A service started before its NATS server says what it waits for, and stops when asked."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from tests.support.harness import ROOT, free_port


def test_a_service_without_nats_says_it_is_waiting_and_stops_on_sigterm() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIDEKICK_")}
    env["SIDEKICK_NATS_URL"] = f"nats://user:secret-pw@127.0.0.1:{free_port()}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "services.cli", "run", "frontline"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    seen = ""
    while "waiting for NATS" not in seen:
        assert time.monotonic() < deadline, seen
        seen += proc.stdout.readline()
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0
    assert "secret-pw" not in seen + out, "the password is never logged"
    assert "stopped while waiting for NATS" in out
