"""`sidekick up`: embedded nats-server, five child processes, restart on death, clean stop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.harness import ROOT, Client, free_port, llm_env


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


class Up:
    def __init__(self, proc: subprocess.Popen[str], port: int, log: Path) -> None:
        self.proc, self.port, self.log = proc, port, log

    def output(self) -> str:
        return self.log.read_text()

    def wait_for(self, text: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.output():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"never saw {text!r}:\n{self.output()[-3000:]}")
            time.sleep(0.1)


@pytest.fixture
def up(tmp_path: Path, fake_llm: FakeOpenAI) -> Iterator[Up]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SIDEKICK_", "OPENAI_"))}
    env.update(llm_env(fake_llm.base_url))
    log = tmp_path / "up.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "services.cli",
                "up",
                "--port",
                str(port),
                "--data-dir",
                str(tmp_path / "data"),
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
    handle = Up(proc, port, log)
    yield handle
    if proc.poll() is None:
        proc.kill()
        proc.wait()


async def test_up_serves_chat_restarts_a_dead_child_and_stops_without_orphans(up: Up) -> None:
    up.wait_for("Sidekick is up")
    url = f"ws://127.0.0.1:{up.port}/ws"
    async with Client(url) as client:
        assert (await client.ask("hello")).text
        assert (await client.ask("search the news")).text.startswith("Answer to:")

    kids = children_of(up.proc.pid)
    assert len(kids) == 6, "nats-server and five services"
    services = [p for p in kids if "services.cli" in Path(f"/proc/{p}/cmdline").read_text()]
    os.kill(services[1], signal.SIGKILL)
    up.wait_for("restarting")
    up.wait_for("ready", timeout=30)
    async with Client(url) as client:
        deadline = time.monotonic() + 60
        while True:  # the restarted child may take a moment to join its consumer
            convo = await client.ask("search again")
            if convo.text.startswith("Answer to:") or time.monotonic() > deadline:
                break
        assert convo.text.startswith("Answer to:")

    kids = children_of(up.proc.pid)
    up.proc.send_signal(signal.SIGTERM)
    assert up.proc.wait(30) == 0
    deadline = time.monotonic() + 10
    while any(alive(p) for p in kids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in kids if alive(p)], "every child stopped with its parent"
