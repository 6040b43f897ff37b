"""`sidekick up` as a user runs it: its own process group (as a terminal's foreground job),
an embedded nats-server, the fake model, a port of its own, its whole output in one file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.harness import ROOT, LoopbackGateway, free_port, llm_env


def children_of(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split()[2] == "Z")


def environ(pid: int) -> dict[str, str]:
    """A process's environment as it was started (/proc/<pid>/environ)."""
    raw = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
    return dict(entry.split("=", 1) for entry in raw.split("\0") if "=" in entry)


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    except OSError:
        return ""


class Up(LoopbackGateway):
    """One `sidekick up --port P --data-dir D` process and its output."""

    def __init__(
        self,
        tmp: Path,
        model_url: str,
        env: dict[str, str] | None = None,
        extra: list[str] | None = None,
        port: int | None = None,
    ) -> None:
        self.gateway_port = port or free_port()
        self.log = tmp / "up.log"
        full = {k: v for k, v in os.environ.items() if not k.startswith(("SIDEKICK_", "OPENAI_"))}
        full.update(llm_env(model_url))
        full.update(env or {})
        args = [sys.executable, "-m", "services.cli", "up", "--port", str(self.gateway_port)]
        args += ["--data-dir", str(tmp / "data"), *(extra or [])]
        with self.log.open("w") as out:
            self.proc = subprocess.Popen(
                args,
                cwd=ROOT,
                env=full,
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,  # a process group of its own, like a terminal's job
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, text: str, timeout: float = 90, after: int = 0) -> None:
        """Until `text` appears in the output past character `after`."""
        deadline = time.monotonic() + timeout
        while text not in self.output()[after:]:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"never saw {text!r}:\n{self.output()[-4000:]}")
            time.sleep(0.1)

    def nats_pid(self) -> int:
        (pid,) = [p for p in children_of(self.proc.pid) if "nats-server" in cmdline(p)]
        return pid

    def interrupt(self, sig: signal.Signals) -> int:
        """What a terminal's Ctrl-C (SIGINT to the foreground group) or a `kill` does."""
        if sig == signal.SIGINT:
            os.killpg(self.proc.pid, sig)
        else:
            self.proc.send_signal(sig)
        return self.proc.wait(60)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
