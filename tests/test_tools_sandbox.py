"""python_run: the model's code runs in a separate process with CPU, memory and wall-clock
limits, no network and an empty environment; these run real child processes."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from services.workers.tools.python_sandbox import Limits, PythonSandbox
from tests.support.fakes.http import FakeServer, Response

MiB = 1024 * 1024


@pytest.fixture(scope="module")
def sandbox() -> PythonSandbox:
    return PythonSandbox(
        Limits(cpu_seconds=1, memory_bytes=256 * MiB, wall_seconds=4, output_chars=2000)
    )


async def test_normal_code_returns_its_stdout_and_exit_status(sandbox: PythonSandbox) -> None:
    result = await sandbox.run("import math\nprint(sum(range(10)), math.factorial(5))")
    assert result.exit_code == 0
    assert result.stdout.strip() == "45 120"
    assert result.stopped is None
    assert "exit status: 0" in result.render() and "45 120" in result.render()


async def test_an_exception_comes_back_on_stderr_with_a_failing_status(
    sandbox: PythonSandbox,
) -> None:
    result = await sandbox.run("print('before')\nraise ValueError('no good')")
    assert result.exit_code == 1
    assert result.stdout.strip() == "before"
    assert "ValueError: no good" in result.stderr


async def test_an_infinite_loop_is_killed_at_its_cpu_limit(sandbox: PythonSandbox) -> None:
    result = await sandbox.run("while True:\n    pass")
    assert result.exit_code is not None and result.exit_code < 0  # killed by a signal
    assert result.stopped is not None and "CPU time limit of 1s" in result.stopped


async def test_a_sleeping_program_is_killed_at_the_wall_clock_limit(
    sandbox: PythonSandbox,
) -> None:
    result = await sandbox.run("import time\nprint('started', flush=True)\ntime.sleep(600)")
    assert result.stopped is not None and "wall-clock limit of 4s" in result.stopped
    assert result.stdout.strip() == "started"


async def test_a_memory_hog_is_stopped(sandbox: PythonSandbox) -> None:
    result = await sandbox.run(
        "chunks = []\nwhile True:\n    chunks.append(bytearray(16 * 1024 * 1024))"
    )
    assert result.exit_code != 0
    assert "MemoryError" in result.stderr
    assert result.stopped is not None and "memory limit of 256 MiB" in result.stopped


async def test_a_socket_connect_fails_and_nothing_reaches_the_server(
    sandbox: PythonSandbox,
) -> None:
    server = FakeServer().start()
    server.route("GET", "/", lambda rec: Response(200, {"reached": True}))
    port = server.url.rsplit(":", 1)[1]
    try:
        code = (
            "import socket\n"
            "s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
            "s.settimeout(3)\n"
            "try:\n"
            f"    s.connect(('127.0.0.1', {port}))\n"
            "    s.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n')\n"
            "    print('CONNECTED', s.recv(100))\n"
            "except OSError as exc:\n"
            "    print('REFUSED', type(exc).__name__, exc)\n"
        )
        result = await sandbox.run(code)
    finally:
        server.stop()
    assert result.exit_code == 0, result.render()
    assert result.stdout.startswith("REFUSED"), result.stdout
    assert "CONNECTED" not in result.stdout
    assert server.requests == []


async def test_the_code_sees_none_of_the_workers_environment(
    sandbox: PythonSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PUSHOVER_TOKEN", "must-not-leak")
    result = await sandbox.run("import os\nprint(sorted(os.environ))\nprint(os.getcwd())")
    assert "PUSHOVER_TOKEN" not in result.stdout
    assert "must-not-leak" not in result.stdout
    assert "sidekick-py-" in result.stdout  # a fresh temporary working directory


async def test_the_code_cannot_raise_its_own_limits(sandbox: PythonSandbox) -> None:
    result = await sandbox.run(
        "import resource\nresource.setrlimit(resource.RLIMIT_CPU, (1000, 1000))"
    )
    assert result.exit_code == 1
    assert "not allowed in the sandbox" in result.stderr


async def test_endless_output_is_cut_to_the_bound(sandbox: PythonSandbox) -> None:
    result = await sandbox.run("import sys\nfor i in range(200000):\n    print('line', i)")
    assert result.exit_code == 0
    assert result.stdout_truncated
    assert len(result.stdout) <= 2000 + 100
    assert result.stdout.startswith("line 0\n")
    assert "line 199999" in result.stdout  # the end is kept too


async def test_the_code_cannot_read_hidden_folders_or_other_processes() -> None:
    hidden = Path(tempfile.mkdtemp(prefix="sidekick-hidden-"))
    visible = Path(tempfile.mkdtemp(prefix="sidekick-visible-"))
    try:
        for folder in (hidden, visible):
            folder.chmod(0o755)  # readable by anyone: only the sandbox's own rule keeps it out
            (folder / "note.txt").write_text("another session's note")
            (folder / "note.txt").chmod(0o644)
        sandbox = PythonSandbox(Limits(cpu_seconds=2, wall_seconds=10), hidden=(hidden,))
        code = (
            "import os\n"
            f"print(open({str(visible / 'note.txt')!r}).read())\n"
            "for attempt in (\n"
            f"    lambda: open({str(hidden / 'note.txt')!r}).read(),\n"
            f"    lambda: os.listdir({str(hidden)!r}),\n"
            f"    lambda: open('/proc/{os.getpid()}/environ', 'rb').read(),\n"
            "):\n"
            "    try:\n"
            "        print('READ', attempt())\n"
            "    except PermissionError as exc:\n"
            "        print('REFUSED', exc)\n"
        )
        result = await sandbox.run(code)
    finally:
        shutil.rmtree(hidden)
        shutil.rmtree(visible)
    lines = result.stdout.splitlines()
    assert lines[0] == "another session's note", result.render()
    assert len(lines) == 4 and all(line.startswith("REFUSED") for line in lines[1:]), lines
    assert all("outside what the sandbox may read" in line for line in lines[1:])
