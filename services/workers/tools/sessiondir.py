"""A session's own folder: the one place user code may write, shared by python_run (where it is
the working folder, `/work` inside the sandbox) and the files tools, kept between requests.

On the host it is `<files root>/<hash of the session id>`. When the worker runs as root, each
session's code runs as a uid of its own (`session_uid`): the kernel then counts that session's
processes apart from everyone else's (root is exempt from RLIMIT_NPROC, so a fork bomb run as
root could not be bounded), and the folder belongs to that uid. Without root every session
shares the worker's uid, and the sandbox's own namespaces keep sessions apart.

Paths inside the folder are opened component by component relative to directory descriptors,
never following a symlink at open time (`O_NOFOLLOW`): a symlink planted by user code is read
with `readlink` and followed only while it stays inside the folder, so swapping a component for
a link between a check and an open cannot lead outside.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
from collections import deque
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from services.runtime.bus.kvstore import key_for
from services.workers.tools.errors import PathRefused, ToolError

# Where the session folder appears inside the python_run sandbox. A symlink written by user code
# with an absolute target under it means the same place in the folder.
SANDBOX_HOME = "/work"
# Session uids (root only): a range real accounts do not use.
UID_BASE = 200_000
UID_SPAN = 800_000
MAX_HOPS = 40
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def session_uid(session_id: str) -> int | None:
    """The uid a session's code runs as, or None when the worker cannot switch uids."""
    if os.geteuid() != 0:
        return None
    digest = int(hashlib.sha256(session_id.encode()).hexdigest()[:12], 16)
    return UID_BASE + digest % UID_SPAN


class SessionFolder:
    """One session's folder under `base`."""

    def __init__(self, base: Path, session_id: str) -> None:
        self.base = base
        self.root = base / key_for(session_id)
        self.uid = session_uid(session_id)

    def ensure(self) -> Path:
        """Create the folder (private to the session's uid) if it is not there yet."""
        self.base.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            self.root.mkdir(mode=0o700)
        info = self.root.lstat()
        if not stat.S_ISDIR(info.st_mode):
            raise ToolError("the session's files folder is not a folder; ask the operator.")
        if self.uid is not None and info.st_uid != self.uid:
            os.chown(self.root, self.uid, self.uid, follow_symlinks=False)
        return self.root

    def own(self, fd: int) -> None:
        """Give what the files tools create to the session's uid, so its code can change it."""
        if self.uid is not None:
            os.fchown(fd, self.uid, self.uid)

    # --- resolving and opening, never following a link out ----------------------------------

    def parts(self, path: str) -> list[str]:
        """The path's components inside the folder, with every symlink resolved; PathRefused
        when it is absolute, uses `..` or a symlink leads outside the folder."""
        text = path.strip() or "."
        if "\x00" in text:
            raise PathRefused(path, "it contains a NUL character.")
        pure = PurePosixPath(text)
        if pure.is_absolute() or text.startswith("~"):
            raise PathRefused(
                path,
                "absolute paths are not allowed; give a path relative to "
                "your files folder, e.g. 'notes/todo.txt'.",
            )
        if ".." in pure.parts:
            raise PathRefused(path, "'..' is not allowed; paths stay inside your files folder.")
        self.ensure()
        todo: deque[str] = deque(pure.parts)
        done: list[str] = []
        hops = 0
        while todo:
            part = todo.popleft()
            if part in ("", "."):
                continue
            if part == "..":  # only from a relative symlink's target
                if not done:
                    raise _outside(path)
                done.pop()
                continue
            target = self._readlink(done, part, path)
            if target is None:
                done.append(part)
                continue
            hops += 1
            if hops > MAX_HOPS:
                raise PathRefused(path, "it goes through too many symlinks.")
            if target.startswith("/"):
                done, inner = [], self._inside(target)
                if inner is None:
                    raise _outside(path)
                todo.extendleft(reversed(inner))
            else:
                todo.extendleft(reversed(PurePosixPath(target).parts))
        return done

    def _inside(self, absolute: str) -> list[str] | None:
        """An absolute link target as components inside the folder, if it points inside."""
        target = PurePosixPath(os.path.normpath(absolute))
        for prefix in (PurePosixPath(SANDBOX_HOME), PurePosixPath(os.path.realpath(self.root))):
            if target == prefix or target.is_relative_to(prefix):
                return list(target.relative_to(prefix).parts)
        return None

    def _readlink(self, done: list[str], name: str, path: str) -> str | None:
        """The target of `name` if it is a symlink; None if it is anything else or absent."""
        try:
            with self.directory(done, path) as fd:
                return os.readlink(name, dir_fd=fd)
        except (_Missing, FileNotFoundError):
            return None
        except OSError as exc:
            if exc.errno in (errno.EINVAL, errno.ENOTDIR):
                return None
            raise

    @contextlib.contextmanager
    def directory(self, parts: list[str], path: str, *, create: bool = False) -> Iterator[int]:
        """A descriptor of the folder at `parts`, opened one real directory at a time."""
        fd = os.open(self.root, _DIR)
        try:
            for part in parts:
                if create:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o755, dir_fd=fd)
                        child = os.open(part, _DIR, dir_fd=fd)
                        self.own(child)
                        os.close(child)
                try:
                    nxt = os.open(part, _DIR, dir_fd=fd)
                except FileNotFoundError as exc:
                    raise _Missing(path) from exc
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise PathRefused(
                            path, f"{part!r} is not a folder (or changed while it was opened)."
                        ) from exc
                    raise
                os.close(fd)
                fd = nxt
            yield fd
        finally:
            os.close(fd)

    def open(self, path: str, flags: int, *, create_dirs: bool = False) -> tuple[int, list[str]]:
        """Open a file inside the folder (never through a symlink); returns (fd, its parts)."""
        parts = self.parts(path)
        if not parts:
            raise ToolError("give a file name, not the folder itself.")
        with self.directory(parts[:-1], path, create=create_dirs) as dfd:
            flags |= os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            try:
                fd = os.open(parts[-1], flags, 0o644, dir_fd=dfd)
            except FileNotFoundError as exc:
                raise _Missing(path) from exc
            except IsADirectoryError as exc:
                raise ToolError(f"{path!r} is a folder; use files_list.") from exc
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise PathRefused(path, "it became a symlink while it was opened.") from exc
                raise ToolError(f"could not open {path!r}: {exc.strerror}.") from exc
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            os.close(fd)
            raise ToolError(f"{path!r} is a folder; use files_list.")
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            raise PathRefused(path, "it is not a regular file.")
        os.set_blocking(fd, True)
        return fd, parts


class _Missing(ToolError):
    def __init__(self, path: str) -> None:
        super().__init__(f"{path!r} does not exist; files_list shows what there is.")


def _outside(path: str) -> PathRefused:
    return PathRefused(
        path, "it is a symlink (or goes through one) that leads outside your files folder."
    )
