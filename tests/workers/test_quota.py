"""A session folder's quota: the model's code and the files tools cannot fill the worker's disk
through the folder kept between requests. Each attack is real code in the real bubblewrap
sandbox, bounded so that a fallen wall shows as a failed test, not as a full disk."""

from __future__ import annotations

import ast
import json
import os
import uuid
from pathlib import Path

import pytest

from services.runtime.budgets.quota import Quota, measure
from services.workers.tools.bwrap import Limits
from services.workers.tools.files import Files
from services.workers.tools.python_sandbox import PythonSandbox
from services.workers.tools.sessiondir import SessionFolder
from services.workers.tools.toolbox import Call, RunContext, ToolBox
from tests.support.dirs import searchable_dir, searchable_root

MiB = 1024 * 1024
QUOTA = Quota(bytes=8 * MiB, entries=300)


files_root = searchable_root()


@pytest.fixture(scope="module")
def sandbox(files_root: Path) -> PythonSandbox:
    limits = Limits(cpu_seconds=10, wall_seconds=20, output_chars=2000, processes=32)
    return PythonSandbox(limits, files_root, quota=QUOTA)


def session() -> str:
    return f"mallory/{uuid.uuid4().hex[:8]}"


async def stopped_at_quota(sandbox: PythonSandbox, code: str, expect: str) -> str:
    """Run `code` (then print 'done') in a fresh session; it must be stopped at the quota
    before it is done. Returns the session id."""
    sid = session()
    result = await sandbox.run(code + "print('done')\n", sid)
    assert "done" not in result.stdout, result.render()
    assert result.stopped and expect in result.stopped, result.render()
    return sid


def usage_of(files_root: Path, sid: str) -> tuple[int, int]:
    used = measure(SessionFolder(files_root, sid).root, Quota(bytes=0, entries=10**6))
    return used.bytes, used.entries


# 100 files of 1 MiB at about 50 MiB/s: 100 MiB and "done" if nothing stops it.
FILL = (
    "import time\n"
    "for i in range(100):\n"
    "    with open(f'fill{i}', 'wb') as f: f.write(b'x' * (1 << 20))\n"
    "    time.sleep(0.02)\n"
)
TOUCH = (
    "import os, time\n"
    "for i in range(20_000):\n"
    "    os.close(os.open(f'e{i}', os.O_CREAT | os.O_WRONLY))\n"
    "    if i % 50 == 0: time.sleep(0.01)\n"
)


@pytest.mark.parametrize(
    ("code", "told", "which", "most"),
    [
        # The quota, and what a run writes in one poll or two.
        pytest.param(FILL, "went past its quota of 8 MiB", 0, 40 * MiB, id="bytes"),
        pytest.param(TOUCH, "300 files and folders", 1, 5_000, id="entries"),
    ],
)
async def test_code_that_fills_its_folder_with_bytes_or_files_is_killed_at_the_quota(
    sandbox: PythonSandbox, files_root: Path, code: str, told: str, which: int, most: int
) -> None:
    sid = await stopped_at_quota(sandbox, code, told)
    assert usage_of(files_root, sid)[which] < most  # which: 0 bytes, 1 entries


async def test_bytes_hidden_in_a_folder_made_unreadable_still_count(
    sandbox: PythonSandbox,
) -> None:
    # 6 MiB behind a folder with no permissions, then 4 MiB in view: 10 MiB against 8.
    hide = (
        "import os, time\n"
        "os.mkdir('hide')\n"
        "with open('hide/a', 'wb') as f: f.write(b'x' * (6 << 20))\n"
        "os.chmod('hide', 0)\n"
        "with open('b', 'wb') as f: f.write(b'x' * (4 << 20))\n"
        "time.sleep(3)\n"
    )
    await stopped_at_quota(sandbox, hide, "went past its quota")


async def test_a_folder_over_its_quota_may_shrink_but_not_grow(
    sandbox: PythonSandbox, files_root: Path
) -> None:
    sid = session()
    # Over the quota before any run (say the quota was lowered): 10 MiB against 8.
    folder = SessionFolder(files_root, sid)
    root = folder.ensure()
    for name in ("old1", "old2"):
        (root / name).write_bytes(b"x" * (5 * MiB))
        if folder.uid is not None:
            (root / name).chmod(0o666)
    grow = await sandbox.run(
        "import time\nopen('more', 'wb').write(b'x' * (1 << 20))\ntime.sleep(2)\nprint('done')",
        sid,
    )
    assert "done" not in grow.stdout and grow.stopped and "quota" in grow.stopped, grow.render()
    shrink = await sandbox.run(
        "import os, time\nos.remove('old1')\ntime.sleep(1)\nprint('deleted')", sid
    )
    assert shrink.exit_code == 0 and shrink.stdout.strip() == "deleted", shrink.render()
    used, _ = usage_of(files_root, sid)
    assert used < 8 * MiB


async def test_the_files_tools_refuse_a_write_past_the_quota(files_root: Path) -> None:
    quota = Quota(bytes=2 * MiB, entries=20)
    box = ToolBox(
        Files(files_root, max_bytes=MiB, quota=quota).tools(), result_chars=5000, call_timeout=10
    )
    call = Call(RunContext(request_id="r1", session_id=session(), attempt=1), call_id="c1")

    async def write(path: str, size: int) -> tuple[str, bool]:
        outcome = await box.call(
            "files_write", json.dumps({"path": path, "content": "x" * size}), call
        )
        return outcome.content, outcome.ok

    assert (await write("one.txt", 900_000))[1]
    assert (await write("two.txt", 900_000))[1]
    text, ok = await write("three.txt", 900_000)
    assert not ok and "files folder is full" in text and "2 MiB" in text, text
    for i in range(30):
        text, ok = await write(f"small/{i}.txt", 10)
        if not ok:
            break
    assert not ok and "20 files and folders" in text, text
    used, entries = usage_of(files_root, call.run.session_id)
    assert used <= 2 * MiB + 64 * 1024 and entries <= 20


def test_a_folder_its_code_made_unreadable_is_opened_again_and_counted() -> None:
    """Without root (a worker in a user namespace, or run by hand), the walk runs as the folder's
    owner, whom a mode of 000 shuts out too: it gives the owner its permissions back and counts
    what was behind. As root the walk reads everything anyway, so it is run here in a child
    that drops to the folder's uid."""
    uid = 65534 if os.geteuid() == 0 else os.getuid()
    with searchable_dir() as base:
        root = base / "s"
        (root / "hide").mkdir(parents=True)
        (root / "hide" / "a").write_bytes(b"x" * (3 * MiB))
        (root / "half").mkdir()
        (root / "half" / "b").write_bytes(b"x" * MiB)
        for path in (root, root / "hide", root / "hide" / "a", root / "half", root / "half" / "b"):
            os.chown(path, uid, uid)
        (root / "hide").chmod(0)
        (root / "half").chmod(0o400)
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: the folder's owner, not root
            try:
                os.setgroups([])
                os.setresgid(uid, uid, uid)
                os.setresuid(uid, uid, uid)
                used = measure(root, Quota())
                os.write(write_end, repr((used.bytes, used.entries, used.unreadable)).encode())
            finally:
                os._exit(0)
        os.close(write_end)
        with os.fdopen(read_end) as pipe:
            seen = pipe.read()
        os.waitpid(pid, 0)
        assert seen, "the child could not measure the folder"
        used_bytes, entries, unreadable = ast.literal_eval(seen)
        assert unreadable is None and entries == 4 and used_bytes >= 4 * MiB, seen
        for folder in (root / "hide", root / "half"):
            assert folder.stat().st_mode & 0o700 == 0o700
