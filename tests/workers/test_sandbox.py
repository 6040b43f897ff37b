"""python_run: the model's code runs in a real bubblewrap sandbox. Each test runs real code that
attacks one wall (the host's files, processes, network, limits, the session folders) and would
see it fall."""

from __future__ import annotations

import ast
import asyncio
import json
import os
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest

from services.workers.tools.bwrap import Limits, find_bwrap
from services.workers.tools.files import Files
from services.workers.tools.python_sandbox import PythonSandbox
from services.workers.tools.seccomp import denied_syscalls
from services.workers.tools.sessiondir import SessionFolder
from services.workers.tools.toolbox import Call, RunContext, ToolBox
from tests.support.dirs import searchable_root
from tests.support.fakes.http import FakeServer, Response

MiB = 1024 * 1024


files_root = searchable_root()


@pytest.fixture(scope="module")
def sandbox(files_root: Path) -> PythonSandbox:
    limits = Limits(
        cpu_seconds=1, memory_bytes=256 * MiB, wall_seconds=4, output_chars=2000, processes=32
    )
    return PythonSandbox(limits, files_root)


def session() -> str:
    return f"alice/{uuid.uuid4().hex[:8]}"


async def test_bubblewrap_is_found_and_the_sandbox_is_available(sandbox: PythonSandbox) -> None:
    path, where = find_bwrap()
    assert path is not None, where
    status = await sandbox.status()
    assert status.available, status.detail
    assert "bubblewrap" in status.detail


async def test_normal_code_returns_its_stdout_and_exit_status(sandbox: PythonSandbox) -> None:
    result = await sandbox.run("import math\nprint(sum(range(10)), math.factorial(5))", session())
    assert result.exit_code == 0, result.render()
    assert result.stdout.strip() == "45 120"
    assert result.stopped is None
    assert "exit status: 0" in result.render() and "45 120" in result.render()


async def test_an_exception_comes_back_on_stderr_with_a_failing_status(
    sandbox: PythonSandbox,
) -> None:
    result = await sandbox.run("print('before')\nraise ValueError('no good')", session())
    assert result.exit_code == 1
    assert result.stdout.strip() == "before"
    assert "ValueError: no good" in result.stderr


async def test_an_infinite_loop_is_killed_at_its_cpu_limit(sandbox: PythonSandbox) -> None:
    result = await sandbox.run("while True:\n    pass", session())
    assert result.exit_code not in (0, None)
    assert result.stopped is not None and "CPU time limit of 1s" in result.stopped


async def test_a_sleeping_program_is_killed_at_the_wall_clock_limit(
    sandbox: PythonSandbox,
) -> None:
    result = await sandbox.run(
        "import time\nprint('started', flush=True)\ntime.sleep(600)", session()
    )
    assert result.stopped is not None and "wall-clock limit of 4s" in result.stopped
    assert result.stdout.strip() == "started"


async def test_a_memory_hog_is_stopped(sandbox: PythonSandbox) -> None:
    result = await sandbox.run(
        "chunks = []\nwhile True:\n    chunks.append(bytearray(16 * 1024 * 1024))", session()
    )
    assert result.exit_code != 0
    assert "MemoryError" in result.stderr
    assert result.stopped is not None and "memory limit of 256 MiB" in result.stopped


async def test_no_network_is_reachable_and_nothing_reaches_a_local_server(
    sandbox: PythonSandbox,
) -> None:
    server = FakeServer().start()
    server.route("GET", "/", lambda rec: Response(200, {"reached": True}))
    port = server.url.rsplit(":", 1)[1]
    try:
        code = (
            "import socket, subprocess\n"
            "for host in ('127.0.0.1', '::1'):\n"
            "    try:\n"
            f"        s = socket.create_connection((host, {port}), timeout=3)\n"
            "        s.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n')\n"
            "        print('CONNECTED', s.recv(100))\n"
            "    except OSError as exc:\n"
            "        print('REFUSED', type(exc).__name__)\n"
            "try:\n"
            "    socket.getaddrinfo('example.com', 80)\n"
            "    print('RESOLVED')\n"
            "except OSError:\n"
            "    print('REFUSED dns')\n"
            # A program started from the code has no way out either.
            "out = subprocess.run(['python3', '-c', 'import socket; "
            f'socket.create_connection(("127.0.0.1", {port}), timeout=3)\'], '
            "capture_output=True, text=True)\n"
            "print('CHILD', 'ConnectionRefusedError' in out.stderr or 'OSError' in out.stderr)\n"
        )
        result = await sandbox.run(code, session())
    finally:
        server.stop()
    assert result.exit_code == 0, result.render()
    assert "CONNECTED" not in result.stdout and "RESOLVED" not in result.stdout
    assert result.stdout.count("REFUSED") == 3, result.stdout
    assert "CHILD True" in result.stdout
    assert server.requests == []


async def test_the_code_sees_none_of_the_workers_environment(
    sandbox: PythonSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PUSHOVER_TOKEN", "must-not-leak")
    result = await sandbox.run(
        "import os\nprint(sorted(os.environ))\nprint(os.getcwd())\n"
        "print(open('/proc/1/environ', 'rb').read())",
        session(),
    )
    assert "PUSHOVER_TOKEN" not in result.stdout and "must-not-leak" not in result.stdout
    assert result.stdout.splitlines()[1] == "/work", result.render()


async def test_the_hosts_temporary_folders_are_not_written(sandbox: PythonSandbox) -> None:
    marker = f"sidekick-escape-{uuid.uuid4().hex[:8]}"
    code = (
        "import os\n"
        f"for folder in ('/tmp', '/var/tmp', '/dev/shm'):\n"
        f"    open(os.path.join(folder, {marker!r}), 'w').write('x')\n"
        "    print(folder, os.listdir(folder))\n"
    )
    result = await sandbox.run(code, session())
    assert result.exit_code == 0, result.render()  # each write lands in the run's own tmpfs
    for folder in ("/tmp", "/var/tmp", "/dev/shm"):
        assert not (Path(folder) / marker).exists(), folder


async def test_the_hosts_files_and_processes_are_not_in_view(sandbox: PythonSandbox) -> None:
    canary = Path(tempfile.mkdtemp(prefix="sidekick-canary-")) / "canary.txt"
    canary.parent.chmod(0o755)
    canary.write_text("host secret")
    canary.chmod(0o644)  # world-readable on the host
    code = (
        "import os\n"
        "for path in ("
        f"{str(canary)!r}, '/etc/passwd', '/etc/hostname', '/root', "
        f"'/proc/{os.getpid()}/cmdline', '/sys/class/net'):\n"
        "    try:\n"
        "        print('READ', path, open(path).read()[:40] if os.path.isfile(path) "
        "else os.listdir(path))\n"
        "    except OSError as exc:\n"
        "        print('REFUSED', path, type(exc).__name__)\n"
        "print('PIDS', sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n"
    )
    try:
        result = await sandbox.run(code, session())
    finally:
        shutil.rmtree(canary.parent)
    assert result.exit_code == 0, result.render()
    assert "host secret" not in result.stdout
    assert result.stdout.count("REFUSED") == 6, result.stdout
    pids = ast.literal_eval(result.stdout.split("PIDS", 1)[1].strip())
    assert max(pids) < 10, pids  # its own PID namespace: a handful of its own processes


async def test_a_daemon_started_by_the_code_dies_with_the_run(
    sandbox: PythonSandbox, files_root: Path
) -> None:
    sid = session()
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        for i in range(200):\n"
        "            with open('beacon.txt', 'a') as f:\n"
        "                f.write('.')\n"
        "            time.sleep(0.05)\n"
        "    os._exit(0)\n"
        "time.sleep(0.5)\n"
        "print('parent done')\n"
    )
    result = await sandbox.run(code, sid)
    assert "parent done" in result.stdout, result.render()
    beacon = SessionFolder(files_root, sid).root / "beacon.txt"
    before = beacon.stat().st_size
    await asyncio.sleep(1.0)
    assert beacon.stat().st_size == before, "the daemon outlived its run"
    # A later run (the same session, so the same uid) sees nothing of it either.
    later = await sandbox.run(
        "import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))", sid
    )
    assert later.stdout.strip() in ("[1, 2]", "[1, 2, 3]"), later.stdout


async def test_a_fork_bomb_is_bounded_by_the_process_limit(sandbox: PythonSandbox) -> None:
    code = (
        "import os, time\n"
        "n = 0\n"
        "for i in range(2000):\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError as exc:\n"
        "        print('stopped after', n, exc.errno)\n"
        "        break\n"
        "    if pid == 0:\n"
        "        time.sleep(3)\n"
        "        os._exit(0)\n"
        "    n += 1\n"
        "else:\n"
        "    print('forked', n)\n"
    )
    result = await sandbox.run(code, session())
    assert result.stdout.startswith("stopped after"), result.render()
    assert int(result.stdout.split()[2]) <= 32


async def test_the_code_cannot_raise_its_own_limits(sandbox: PythonSandbox) -> None:
    result = await sandbox.run(
        "import resource\n"
        "for what in (resource.RLIMIT_CPU, resource.RLIMIT_NPROC, resource.RLIMIT_AS):\n"
        "    try:\n"
        "        resource.setrlimit(what, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))\n"
        "        print('RAISED')\n"
        "    except (ValueError, OSError):\n"
        "        print('REFUSED')\n",
        session(),
    )
    assert result.stdout.split() == ["REFUSED"] * 3, result.render()


async def test_refused_system_calls_fail_with_eperm(sandbox: PythonSandbox) -> None:
    calls = denied_syscalls()
    assert {"keyctl", "unshare", "mount", "bpf", "ptrace"} <= set(calls)
    code = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        f"for name, nr in {sorted(calls.items())!r}:\n"
        "    if name in ('keyctl', 'unshare', 'mount', 'bpf', 'ptrace', 'setns'):\n"
        "        r = libc.syscall(nr, 0, 0, 0, 0, 0)\n"
        "        print(name, r, ctypes.get_errno())\n"
    )
    result = await sandbox.run(code, session())
    lines = result.stdout.split("\n")
    assert len([x for x in lines if x]) == 6, result.render()
    for line in filter(None, lines):
        _, r, errno = line.split()
        assert (r, errno) == ("-1", "1"), line  # EPERM


async def test_the_session_folder_is_the_working_folder_shared_and_private(
    sandbox: PythonSandbox, files_root: Path
) -> None:
    alice, bob = session(), session()
    wrote = await sandbox.run("open('data.csv', 'w').write('a,b\\n1,2\\n')", alice)
    assert wrote.exit_code == 0, wrote.render()
    assert (SessionFolder(files_root, alice).root / "data.csv").read_text() == "a,b\n1,2\n"
    kept = await sandbox.run("print(open('data.csv').read().strip())", alice)
    assert kept.stdout.strip() == "a,b\n1,2", kept.render()
    other = await sandbox.run(
        "import os\nprint(os.listdir('.'), os.listdir('/work'))\n"
        f"print(os.path.exists({str(SessionFolder(files_root, alice).root)!r}))",
        bob,
    )
    assert other.stdout.split("\n")[:2] == ["[] []", "False"], other.render()


async def test_without_bubblewrap_the_tool_is_disabled_and_says_why(files_root: Path) -> None:
    missing = PythonSandbox(Limits(), files_root, bwrap="/nonexistent/bwrap")
    status = await missing.status()
    assert not status.available and "SIDEKICK_BWRAP" in status.detail
    with pytest.raises(Exception, match="disabled; there is no weaker mode"):
        await missing.run("print('ran anyway')", session())
    broken = PythonSandbox(Limits(), files_root, bwrap=shutil.which("false"))
    status = await broken.status()
    assert not status.available and "could not start" in status.detail


async def test_the_files_tools_refuse_what_user_code_planted(
    sandbox: PythonSandbox, files_root: Path
) -> None:
    """User code can make symlinks and FIFOs in its folder; the files tools (running as the
    worker, outside the sandbox) must not follow one out, nor hang on one."""
    sid = session()
    victim = Path(tempfile.mkdtemp(prefix="sidekick-victim-")) / "victim.txt"
    victim.write_text("untouched")
    planted = await sandbox.run(
        "import os\n"
        "open('ok.txt', 'w').write('fine')\n"
        "os.symlink('/etc/passwd', 'passwd')\n"
        f"os.symlink({str(victim)!r}, 'victim')\n"
        "os.symlink('/work/ok.txt', 'inner')\n"
        "os.symlink('../../..', 'up')\n"
        "os.mkfifo('pipe')\n",
        sid,
    )
    assert planted.exit_code == 0, planted.render()
    box = ToolBox(Files(files_root, max_bytes=1000).tools(), result_chars=5000, call_timeout=10)
    call = Call(RunContext(request_id="r1", session_id=sid, attempt=1), call_id="c1")

    async def tool(name: str, **args: object) -> tuple[str, bool]:
        outcome = await box.call(name, json.dumps(args), call)
        return outcome.content, outcome.ok

    for name, args in (
        ("files_read", {"path": "passwd"}),
        ("files_read", {"path": "up/etc/passwd"}),
        ("files_write", {"path": "victim", "content": "pwned"}),
        ("files_list", {"path": "up"}),
    ):
        text, ok = await tool(name, **args)
        assert not ok and "leads outside your files folder" in text, (name, text)
    assert await tool("files_read", path="inner") == ("fine", True)
    text, ok = await tool("files_read", path="pipe")
    assert not ok and "not a regular file" in text
    assert victim.read_text() == "untouched"
    shutil.rmtree(victim.parent)
