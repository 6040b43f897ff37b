"""Round two of python_run's walls: the code holds no descriptor of the host beyond its stdio,
and root gets a working sandbox out of the box with its clone under a private home."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.workers.tools import reachable
from services.workers.tools.catalog import files_root, python_sandbox
from services.workers.tools.python_sandbox import PythonSandbox
from services.workers.tools.settings import ToolsSettings
from tests.support.dirs import searchable_root
from tests.support.sandbox import LIMITS, SNOOP

ROOT = Path(__file__).resolve().parents[2]
files = searchable_root()


async def test_the_code_holds_no_descriptor_of_the_host_beyond_its_stdio(files: Path) -> None:
    result = await PythonSandbox(LIMITS, files).run(SNOOP, "alice/fds")
    assert result.exit_code == 0, result.render()
    held = [line.split(" ", 1) for line in result.stdout.splitlines()]
    assert [fd for fd, _ in held] == ["0", "1", "2"], result.stdout
    assert "bwrap" not in result.stdout and ".venv" not in result.stdout


def test_under_the_services_event_loop_too_the_code_holds_no_descriptor_of_the_host(
    files: Path,
) -> None:
    """The services run on uvloop, whose spawn clears close-on-exec on passed descriptors
    after the pre-exec hook: the same snoop, run by a child process on uvloop."""
    child = f"""
import asyncio, json, sys, uvloop
from pathlib import Path
from services.workers.tools.python_sandbox import PythonSandbox
from tests.support.sandbox import LIMITS, SNOOP
async def main() -> None:
    assert isinstance(asyncio.get_running_loop(), uvloop.Loop)
    result = await PythonSandbox(LIMITS, Path({str(files)!r})).run(SNOOP, "alice/uvfds")
    print(json.dumps([result.exit_code, result.stdout, result.render()]))
uvloop.run(main())
"""
    proc = subprocess.run(
        [sys.executable, "-c", child], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    exit_code, stdout, render = json.loads(proc.stdout.splitlines()[-1])
    assert exit_code == 0, render
    held = [line.split(" ", 1) for line in stdout.splitlines()]
    assert [fd for fd, _ in held] == ["0", "1", "2"], stdout
    assert "bwrap" not in stdout and ".venv" not in stdout


@pytest.fixture
def private_clone(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A clone under a private home (like /root at 0700), and a stand-in for /var/lib/sidekick
    (so the test leaves nothing in the system's folders)."""
    home = Path(tempfile.mkdtemp(prefix="sidekick-home-"))
    home.chmod(0o700)
    shared = Path(tempfile.mkdtemp(prefix="sidekick-varlib-"))
    shared.chmod(0o755)
    monkeypatch.setattr(reachable, "SHARED_BASE", shared / "sidekick")
    try:
        yield home / "clone"
    finally:
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(shared, ignore_errors=True)


async def test_root_with_a_clone_under_a_private_home_gets_python_run(
    private_clone: Path,
) -> None:
    assert os.geteuid() == 0, "this attack needs root (the sandbox's per-session uids)"
    data_dir = private_clone / ".sidekick"
    data_dir.mkdir(parents=True)
    settings = ToolsSettings()
    sandbox = python_sandbox(settings, data_dir)
    status = await sandbox.status()
    assert status.available, status.detail
    result = await sandbox.run("open('note.txt', 'w').write('hi'); print('ran')", "alice/root")
    assert result.exit_code == 0 and result.stdout.strip() == "ran", result.render()
    # The files tools see the same folder (one per session, shared with python_run).
    root = files_root(settings, data_dir)
    assert root == sandbox.files_root
    assert any(p.name == "note.txt" for p in root.rglob("*"))
