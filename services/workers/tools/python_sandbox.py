"""python_run: the model's code in a bubblewrap sandbox, and nothing weaker.

Each run is a fresh `bwrap` container:
- every namespace unshared (user, PID, network, IPC, UTS, cgroup, mount): no network at all,
  a `/proc` that shows only the run's own processes, and when the run's first process ends the
  kernel kills everything else in its PID namespace, so nothing a run starts outlives it;
- `--die-with-parent`, `--new-session`, `--cap-drop ALL`, nested user namespaces disabled, and a
  seccomp filter refusing the system calls a sandboxed program has no use for (kernel keyrings,
  mounts, module loading, ptrace, bpf, perf, io_uring, ...);
- an empty environment but for a fixed minimal one (no key can leak); the system (`/usr`) and
  the interpreter read-only; private `/tmp`, `/var/tmp` and `/dev/shm` of bounded size; a minimal
  `/dev`; nothing else of the host, not even `/etc`;
- the session's own folder (sessiondir.py) bound read-write at `/work`, the working folder,
  shared with the files tools and kept between runs; other sessions' folders are not in view;
- resource limits set before `bwrap` execs (CPU seconds, address space, file size, open files,
  processes), and a wall-clock limit that kills the whole PID namespace;
- as root, the run's uid is the session's own (root is exempt from the process limit);
- the session folder's quota (services/runtime/budgets/quota.py): a run that grows the folder
  past it is killed.

Where bubblewrap is missing or the kernel refuses it namespaces, `python_run` is disabled and
says why (`sandbox_status()`, also logged at start-up); it never runs code another way.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from services.runtime.budgets.quota import POLL, FolderUsage, Quota, measure
from services.workers.tools.bwrap import (
    Limits,
    before_exec,
    bwrap_args,
    find_bwrap,
    kill_group,
    why_stopped,
)
from services.workers.tools.errors import ToolNotConfigured
from services.workers.tools.seccomp import seccomp_filter
from services.workers.tools.sessiondir import SessionFolder

# Runs in the sandbox before the user's code, which it reads from stdin (no file to plant).
BOOTSTRAP = r"""
import os, sys
# The host's descriptors stay out: stdio only. The worker marks bwrap's own descriptor
# close-on-exec, but under uvloop (the services' loop) libuv clears that flag on every passed
# descriptor after the worker's pre-exec hook has run, so one can arrive here: it is closed
# before any of the user's code runs.
for _fd in os.listdir("/proc/self/fd"):
    if int(_fd) > 2:
        try:
            os.close(int(_fd))
        except OSError:
            pass  # the listing's own, closed by now
_code = sys.stdin.buffer.read().decode("utf-8", "replace")
_null = os.open("/dev/null", os.O_RDONLY)
os.dup2(_null, 0)
os.close(_null)
sys.stdin = open(0, encoding="utf-8", closefd=False)
sys.argv = ["main.py"]
del os
exec(compile(_code, "main.py", "exec"), {"__name__": "__main__", "__file__": "main.py"})
"""


@dataclass(frozen=True)
class SandboxStatus:
    """Whether python_run can run here, and if not, why (for the tool, the log and doctor)."""

    available: bool
    detail: str
    bwrap: str | None = None
    python: str | None = None


@dataclass
class RunResult:
    exit_code: int | None
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    stopped: str | None  # why the run was stopped, when a limit stopped it
    isolation: str

    def render(self) -> str:
        lines = [f"exit status: {self.exit_code}"]
        if self.stopped:
            lines.append(f"stopped: {self.stopped}")
        for name, text, cut in (
            ("stdout", self.stdout, self.stdout_truncated),
            ("stderr", self.stderr, self.stderr_truncated),
        ):
            lines.append(f"--- {name}{' (truncated)' if cut else ''}")
            lines.append(text if text else "(empty)")
        return "\n".join(lines)


class _Capture:
    """Keeps the start of a stream and its last few lines (where a traceback ends); drains the
    rest so the child never blocks on a full pipe."""

    TAIL = 1500

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    async def drain(self, stream: asyncio.StreamReader) -> None:
        cap = self.limit * 4  # bytes; cut to characters when decoded
        while chunk := await stream.read(65536):
            self.total += len(chunk)
            room = cap - len(self.head)
            if room > 0:
                self.head += chunk[:room]
            self.tail = (self.tail + chunk)[-self.TAIL :]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.head) or len(self.head.decode(errors="replace")) > self.limit

    @property
    def ending(self) -> str:
        return self.tail.decode("utf-8", errors="replace")

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        if not self.truncated:
            return head
        keep = max(self.limit - self.TAIL, self.limit // 2)
        return f"{head[:keep]}\n[... output cut here ...]\n{self.ending[-(self.limit - keep) :]}"


def _pythons(configured: str | None) -> list[str]:
    """Interpreters to try: the configured one, else the worker's own base interpreter (not its
    virtualenv: user code gets the standard library), then the usual system ones."""
    if configured:
        return [os.path.realpath(configured)]
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}"
    found: list[str] = []
    for candidate in (str(base), "/usr/local/bin/python3", "/usr/bin/python3"):
        real = os.path.realpath(candidate)  # bound read-only with its prefix, by real path
        if os.access(real, os.X_OK) and real not in found:
            found.append(real)
    return found


class PythonSandbox:
    def __init__(
        self,
        limits: Limits,
        files_root: Path,
        *,
        python: str | None = None,
        bwrap: str | None = None,
        quota: Quota | None = None,
    ) -> None:
        self.limits = limits
        self.files_root = files_root
        self.quota = quota or Quota()
        self._python = python
        self._bwrap = bwrap
        self._status: SandboxStatus | None = None
        self._lock = asyncio.Lock()

    async def status(self) -> SandboxStatus:
        """Probe once per process: can a sandboxed interpreter start here?"""
        async with self._lock:
            if self._status is None:
                self._status = await self._probe()
            return self._status

    async def _probe(self) -> SandboxStatus:
        bwrap, where = find_bwrap(self._bwrap)
        if bwrap is None:
            return SandboxStatus(False, where)
        why = "no Python interpreter was found; set SIDEKICK_PYTHON_EXECUTABLE"
        for python in _pythons(self._python):
            # A folder where the sessions' folders are, run as a session's uid would be: the
            # probe fails as a real run would (e.g. a files root the sandbox's uid cannot reach).
            folder = SessionFolder(self.files_root, f"sidekick sandbox probe {os.getpid()}")
            try:
                probe = folder.ensure()
                result = await self._launch(
                    bwrap, python, probe, folder.uid, "print('ok')", self.limits
                )
            finally:
                shutil.rmtree(folder.root, ignore_errors=True)
            if result.exit_code == 0 and result.stdout.strip() == "ok":
                detail = f"bubblewrap from {where} ({bwrap}), Python {python}"
                return SandboxStatus(True, detail, bwrap, python)
            why = _explain(bwrap, python, result, self.files_root)
        return SandboxStatus(False, why, bwrap)

    async def run(self, code: str, session_id: str) -> RunResult:
        status = await self.status()
        if not status.available or status.bwrap is None or status.python is None:
            raise ToolNotConfigured(
                "python_run", f"{status.detail}. It is disabled; there is no weaker mode."
            )
        folder = SessionFolder(self.files_root, session_id)
        workdir = folder.ensure()
        before = await asyncio.to_thread(measure, workdir, self.quota)
        return await self._launch(
            status.bwrap, status.python, workdir, folder.uid, code, self.limits, before
        )

    async def _launch(
        self,
        bwrap: str,
        python: str,
        workdir: Path,
        uid: int | None,
        code: str,
        limits: Limits,
        before: FolderUsage | None = None,
    ) -> RunResult:
        """Start the run; `before`: the session folder's usage, to keep it in its quota (the
        start-up probe's throw-away folder has none)."""
        opened: list[int] = []
        try:
            # bwrap by descriptor: the session's uid may not be able to walk to its folder.
            exe = os.open(bwrap, os.O_RDONLY | os.O_CLOEXEC)
            opened.append(exe)
            read_end, write_end = os.pipe()
            opened.append(read_end)
            os.write(write_end, seccomp_filter())
            os.close(write_end)
            argv = [
                f"/proc/self/fd/{exe}",
                *bwrap_args(limits, workdir=workdir, python=python, seccomp=read_end),
                "--",
                python,
                "-I",
                "-c",
                BOOTSTRAP,
            ]
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                env={},
                pass_fds=tuple(opened),
                preexec_fn=before_exec(limits, uid, close_on_exec=(exe,)),
            )
        finally:
            for fd in opened:
                with contextlib.suppress(OSError):
                    os.close(fd)
        watcher = None
        if before is not None:
            watcher = asyncio.ensure_future(self._watch(proc, workdir, before))
        over_quota = None
        try:
            result = await self._supervise(proc, code, limits)
        finally:
            if watcher is not None:
                watcher.cancel()  # a watcher that killed the run has ended, with why
                with contextlib.suppress(asyncio.CancelledError):
                    over_quota = await watcher
        if over_quota:
            result.stopped = over_quota
        return result

    async def _watch(
        self, proc: asyncio.subprocess.Process, workdir: Path, before: FolderUsage
    ) -> str | None:
        """Measure the folder while the run lasts; kill the run once it has grown the folder
        past the quota (or past what it held, if that was more), and say so."""
        pause = POLL
        while proc.returncode is None:
            await asyncio.sleep(pause)
            started = time.perf_counter()
            now = await asyncio.to_thread(measure, workdir, self.quota)
            # A folder of many files takes longer to walk: walk it at most a fifth of the time.
            pause = max(POLL, 4 * (time.perf_counter() - started))
            if now.over(self.quota, allowed=before):
                kill_group(proc.pid)
                return (
                    f"the session's files folder went past its quota of "
                    f"{self.quota.describe()} ({now.describe()}); killed. Delete files to make "
                    "room."
                )
        return None

    async def _supervise(
        self, proc: asyncio.subprocess.Process, code: str, limits: Limits
    ) -> RunResult:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        out, err = _Capture(limits.output_chars), _Capture(limits.output_chars)
        readers = asyncio.ensure_future(
            asyncio.gather(out.drain(proc.stdout), err.drain(proc.stderr))
        )
        stopped = None
        try:
            async with asyncio.timeout(limits.wall_seconds):
                # A child that already exited closed its stdin: asyncio's loop says so with
                # BrokenPipeError/ConnectionResetError, uvloop's with RuntimeError.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError, RuntimeError):
                    proc.stdin.write(code.encode("utf-8"))
                    await proc.stdin.drain()
                proc.stdin.close()
                await proc.wait()
        except TimeoutError:
            stopped = f"wall-clock limit of {limits.wall_seconds:g}s exceeded; killed"
        finally:
            # bwrap dies, its PID namespace with it (--die-with-parent on its init).
            kill_group(proc.pid)
            await proc.wait()
        try:
            async with asyncio.timeout(5):
                await readers
        except TimeoutError:
            readers.cancel()
        code_ = proc.returncode
        if stopped is None:
            stopped = why_stopped(code_, err.ending, limits)
        return RunResult(
            exit_code=code_,
            stdout=out.text(),
            stderr=err.text(),
            stdout_truncated=out.truncated,
            stderr_truncated=err.truncated,
            stopped=stopped,
            isolation="bubblewrap: no network, own PID namespace, read-only system",
        )


def _explain(bwrap: str, python: str, result: RunResult, files_root: Path) -> str:
    said = (result.stderr.strip() or result.stopped or "no output")[:300]
    why = f"bubblewrap ({bwrap}) could not start {python} in a sandbox: {said}"
    if "Permission denied" in said and os.geteuid() == 0:
        return (
            f"{why}. As root, each session's code runs as a uid of its own, which must be able "
            f"to reach the files folder {files_root}: make its parent folders searchable "
            "(chmod o+x) or set SIDEKICK_FILES_ROOT to a folder that is"
        )
    return f"{why} (user namespaces may not be allowed here; see docs/security.md)"
