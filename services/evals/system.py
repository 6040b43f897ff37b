"""A system of the eval's own (no --url): `sidekick up` on a free port with a fresh data dir and
its own nats-server, with the model settings of this environment. Mail goes to the outbox and
no push is sent (the SendGrid and Pushover keys are left out), limits are off, and it is
stopped when the run ends."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from types import TracebackType

from services.runtime.base.children import die_with_parent, free_port, stop
from services.runtime.base.readyz import wait_ok

LEFT_OUT = ("SENDGRID_", "PUSHOVER_", "SIDEKICK_NATS_URL", "SIDEKICK_AUTH_TOKENS", "SIDEKICK_DATA")


class OwnSystem:
    def __init__(self, ready_timeout: float = 120.0, *, local_model: bool = False) -> None:
        self.local_model = local_model  # `sidekick up --local-model`: the tiny local model
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="sidekick-eval-"))
        self.log = self.dir / "sidekick.log"
        self.ready_timeout = ready_timeout
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(LEFT_OUT)}
        env.update(
            {
                "SIDEKICK_RATE_LIMIT_PER_MINUTE": "0",
                "SIDEKICK_MAX_CONCURRENT_REQUESTS": "0",
                "PYTHONUNBUFFERED": "1",
            }
        )
        return env

    def __enter__(self) -> OwnSystem:
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [
                    *(sys.executable, "-m", "services.cli", "up"),
                    *("--port", str(self.port), "--data-dir", str(self.dir / "data")),
                    *(("--local-model",) if self.local_model else ()),
                ],
                env=self.env(),
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent,
            )
        url = f"http://127.0.0.1:{self.port}/readyz"
        proc = self.proc
        if wait_ok(url, self.ready_timeout, probe_timeout=1, still=lambda: proc.poll() is None):
            return self
        if proc.poll() is not None:
            raise RuntimeError(f"`sidekick up` exited; its log: {self.log}")
        self.stop()
        raise RuntimeError(
            f"the system did not become ready in {self.ready_timeout:.0f}s; its log: {self.log}"
        )

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def stop(self) -> None:
        if self.proc is not None:
            stop([self.proc], grace=30)
