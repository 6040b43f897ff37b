"""python_run: the model's code in a separate, limited process.

Limits, in layers:
- a network namespace with no interfaces (`unshare -n`) when the system allows one, and as
  root the code runs as `nobody` (uid 65534) so it cannot read the worker's files or
  environment; which of these held is probed once per process and reported with each run;
- in every case an audit hook in the child refuses socket connects, binds, sends and name
  look-ups (and, without a namespace, starting programs and loading C libraries, which would
  get around the hook), refuses raising its own resource limits, and refuses opening or
  listing other processes' /proc entries and the folders it is told to hide (the sessions'
  files);
- RLIMIT_CPU (CPU seconds), RLIMIT_AS (address space), RLIMIT_FSIZE, no core files;
- a wall-clock limit after which the whole process group is killed;
- an empty environment (no keys leak), `python -I`, a fresh temporary working directory that
  is deleted afterwards; stdout and stderr are kept up to a bound each.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.workers.tools.errors import ToolNotConfigured

NOBODY = 65534

# Runs in the child before the user's code: limits first, then the hook, then the code.
BOOTSTRAP = r"""
import json, os, resource, sys
cpu, mem, fsize, netns = (int(a) for a in sys.argv[1:5])
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
_NET = frozenset({"socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg",
                  "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr",
                  "socket.getnameinfo"})
_ESCAPE = frozenset({"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
                     "os.fork", "os.forkpty", "pty.spawn", "ctypes.dlopen"})
_LIMITS = frozenset({"resource.setrlimit", "resource.prlimit"})
_FS = frozenset({"open", "os.listdir", "os.scandir"})
_HIDDEN = tuple(json.loads(sys.argv[5]))
_SELF = (f"/proc/{os.getpid()}", "/proc/self", "/proc/thread-self")
def _hidden(path, _hidden=_HIDDEN, _self=_SELF, _real=os.path.realpath, _fs=os.fsdecode):
    if not isinstance(path, (str, bytes)):
        return False
    real = _real(_fs(path))
    if real.startswith("/proc/") and not real.startswith(_self):
        return True  # other processes' environment and memory
    return any(real == h or real.startswith(h + "/") for h in _hidden)
def _hook(event, args, _net=_NET, _escape=_ESCAPE, _limits=_LIMITS, _netns=netns, _fsev=_FS):
    if event in _net:
        raise PermissionError(f"{event}: network access is not allowed in the sandbox")
    if event in _limits:
        raise PermissionError("changing resource limits is not allowed in the sandbox")
    if not _netns and event in _escape:
        raise PermissionError(f"{event}: starting programs is not allowed in the sandbox")
    if event in _fsev and args and _hidden(args[0]):
        raise PermissionError(f"{args[0]!r} is outside what the sandbox may read")
sys.addaudithook(_hook)
del json, os, resource, cpu, mem, fsize, netns, _hook
sys.argv = ["main.py"]
with open("main.py", encoding="utf-8") as _f:
    _code = compile(_f.read(), "main.py", "exec")
del _f
exec(_code, {"__name__": "__main__", "__file__": "main.py", "__builtins__": __builtins__})
"""


@dataclass(frozen=True)
class Limits:
    cpu_seconds: int = 10
    memory_bytes: int = 512 * 1024 * 1024
    wall_seconds: float = 30.0
    output_chars: int = 8_000
    file_bytes: int = 64 * 1024 * 1024


@dataclass(frozen=True)
class Isolation:
    """How runs are launched here, found by probing once."""

    prefix: tuple[str, ...]  # the launcher, e.g. ("unshare", "-n", ...), or nothing
    python: str
    setuid_here: bool  # drop to nobody when starting the child (no launcher does it)
    as_nobody: bool  # the code runs as nobody, one way or the other
    netns: bool
    description: str

    def spawn_kwargs(self) -> dict[str, Any]:
        if not self.setuid_here:
            return {}
        return {"user": NOBODY, "group": NOBODY, "extra_groups": []}


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


class PythonSandbox:
    def __init__(
        self, limits: Limits, *, python: str | None = None, hidden: tuple[Path, ...] = ()
    ) -> None:
        """`hidden`: folders the code may not open or list (e.g. every session's files)."""
        self.limits = limits
        self.hidden = json.dumps([os.path.realpath(h) for h in hidden])
        self._python = python
        self._isolation: Isolation | None = None
        self._lock = asyncio.Lock()

    async def isolation(self) -> Isolation:
        async with self._lock:
            if self._isolation is None:
                self._isolation = await _probe(self._python)
            return self._isolation

    async def run(self, code: str) -> RunResult:
        iso = await self.isolation()
        limits = self.limits
        workdir = Path(tempfile.mkdtemp(prefix="sidekick-py-"))
        try:
            (workdir / "main.py").write_text(code, encoding="utf-8")
            if iso.as_nobody:
                os.chown(workdir, NOBODY, NOBODY)
                os.chown(workdir / "main.py", NOBODY, NOBODY)
            argv = [
                *iso.prefix,
                iso.python,
                "-I",
                "-c",
                BOOTSTRAP,
                str(limits.cpu_seconds),
                str(limits.memory_bytes),
                str(limits.file_bytes),
                "1" if iso.netns else "0",
                self.hidden,
            ]
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=workdir,
                env=_child_env(workdir),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                **iso.spawn_kwargs(),
            )
            assert proc.stdout is not None and proc.stderr is not None
            out, err = _Capture(limits.output_chars), _Capture(limits.output_chars)
            readers = asyncio.ensure_future(
                asyncio.gather(out.drain(proc.stdout), err.drain(proc.stderr))
            )
            stopped = None
            try:
                async with asyncio.timeout(limits.wall_seconds):
                    await proc.wait()
            except TimeoutError:
                stopped = f"wall-clock limit of {limits.wall_seconds:g}s exceeded; killed"
                _kill_group(proc.pid)
                await proc.wait()
            finally:
                _kill_group(proc.pid)  # anything the code left running in its group
            try:
                async with asyncio.timeout(5):
                    await readers
            except TimeoutError:  # something outside the group still holds the pipes
                readers.cancel()
            code_ = proc.returncode
            if stopped is None:
                stopped = _why_stopped(code_, err.ending, limits)
            return RunResult(
                exit_code=code_,
                stdout=out.text(),
                stderr=err.text(),
                stdout_truncated=out.truncated,
                stderr_truncated=err.truncated,
                stopped=stopped,
                isolation=iso.description,
            )
        finally:
            shutil.rmtree(workdir, ignore_errors=True)


def _why_stopped(code: int | None, stderr_end: str, limits: Limits) -> str | None:
    if code == -signal.SIGXCPU:
        return f"CPU time limit of {limits.cpu_seconds}s exceeded; killed"
    if code == -signal.SIGKILL:
        return "killed (SIGKILL) after reaching a limit"
    if code == -signal.SIGXFSZ:
        return f"file size limit of {limits.file_bytes} bytes exceeded; killed"
    if code and "MemoryError" in stderr_end:
        return f"memory limit of {limits.memory_bytes // (1024 * 1024)} MiB exceeded"
    return None


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _child_env(workdir: Path) -> dict[str, str]:
    # Built from nothing: the worker's environment holds keys the code must never see.
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(workdir),
        "TMPDIR": str(workdir),
        "LANG": "C.UTF-8",
        "PYTHONIOENCODING": "utf-8",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def _pythons(configured: str | None) -> list[str]:
    if configured:
        return [configured]
    found = [sys.executable, "/usr/local/bin/python3", "/usr/bin/python3"]
    out: list[str] = []
    for p in found:
        if p and Path(p).exists() and p not in out:
            out.append(p)
    return out


async def _works(argv: list[str], **kwargs: Any) -> bool:
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            cwd="/",
            env=_child_env(Path("/tmp")),
            **kwargs,
        )
        async with asyncio.timeout(15):
            return await proc.wait() == 0
    except (OSError, TimeoutError):
        return False


async def _probe(configured: str | None) -> Isolation:
    """The strongest launch that works here: namespace and nobody, namespace, nobody, plain."""
    root = os.geteuid() == 0
    unshare = shutil.which("unshare")
    nobody = ("-S", str(NOBODY), "-G", str(NOBODY))
    modes: list[Isolation] = []
    for python in _pythons(configured):
        if unshare and root:
            modes.append(
                Isolation((unshare, "-n", *nobody), python, False, True, True, "netns, nobody")
            )
        if unshare:
            modes.append(Isolation((unshare, "-rn"), python, False, False, True, "netns"))
        if root:
            modes.append(Isolation((), python, True, True, False, "nobody, audit hook only"))
        modes.append(Isolation((), python, False, False, False, "audit hook only"))
    modes.sort(key=lambda m: (not m.netns, not m.as_nobody))  # strongest first, any python
    for mode in modes:
        argv = [*mode.prefix, mode.python, "-I", "-c", "import socket"]
        if await _works(argv, **mode.spawn_kwargs()):
            return mode
    raise ToolNotConfigured(
        "python_run",
        "no Python interpreter could be started for it; set SIDEKICK_PYTHON_EXECUTABLE.",
    )
