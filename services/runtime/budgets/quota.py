"""The tools' quota: how much disk a session's files folder may take and how many entries it
may hold.

The folder is shared by python_run and the files tools and kept between requests, so without a
bound one session's code could fill the worker's disk, a file at a time (each run is bounded per
file, in time and in `/tmp`, but not in how many files it leaves behind). The quota is kept:
- by the files tools, which refuse a write that would take the folder past it;
- while python_run's code runs, by a watchdog that measures the folder every `POLL` seconds and
  kills the whole run when it has grown past the quota (a run that started over the quota, say
  to delete files, may not grow it at all). It can overshoot by what a run writes in one poll.

Disk is counted in allocated blocks (what a sparse file really takes), entries are files,
folders and links. The folder is walked by descriptors and never through a symlink; a walk stops
once it has seen more entries than the quota allows. A folder that the session's code made
unreadable is given back its owner's permissions (through an `O_PATH` descriptor, so a folder
swapped for a link in between is never touched); one that still cannot be read counts as over
the quota: the wall does not open because it cannot see.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

POLL = 0.2  # seconds between a running python_run's measurements of its folder
MiB = 1024 * 1024
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_PATH = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class Quota:
    bytes: int = 256 * MiB
    entries: int = 10_000

    def describe(self) -> str:
        return f"{self.bytes / MiB:g} MiB and {self.entries} files and folders"


@dataclass(frozen=True)
class FolderUsage:
    bytes: int
    entries: int
    unreadable: str | None = None  # a folder that could not be read, relative to the root

    def over(self, quota: Quota, *, allowed: FolderUsage | None = None) -> bool:
        """Past the quota (or past `allowed`, where that is larger: a folder already over its
        quota may shrink but not grow)."""
        if self.unreadable is not None:
            return True
        limit_bytes = max(quota.bytes, allowed.bytes if allowed else 0)
        limit_entries = max(quota.entries, allowed.entries if allowed else 0)
        return self.bytes > limit_bytes or self.entries > limit_entries

    def describe(self) -> str:
        if self.unreadable is not None:
            return f"its folder {self.unreadable!r} cannot be read, so its size is unknown"
        return f"it holds {self.bytes / MiB:.1f} MiB in {self.entries} files and folders"


def measure(root: Path, quota: Quota) -> FolderUsage:
    """The folder's disk use and entries; stops counting once past the quota's entries."""
    try:
        top = os.open(root, _DIR)
    except FileNotFoundError:
        return FolderUsage(0, 0)
    total = entries = 0
    stack: list[tuple[int, str]] = [(top, ".")]
    try:
        while stack:
            fd, where = stack.pop()
            try:
                _own(fd)
                with os.scandir(fd) as listing:
                    for entry in listing:
                        entries += 1
                        if entries > quota.entries:
                            return FolderUsage(total, entries)
                        info = entry.stat(follow_symlinks=False)
                        total += info.st_blocks * 512
                        if stat.S_ISDIR(info.st_mode):
                            path = f"{where}/{entry.name}".removeprefix("./")
                            child = _open_dir(entry.name, fd)
                            if child is None:
                                return FolderUsage(total, entries, unreadable=path)
                            stack.append((child, path))
            finally:
                os.close(fd)
    finally:
        for fd, _ in stack:
            os.close(fd)
    return FolderUsage(total, entries)


def _own(fd: int) -> None:
    """Give a folder back the owner's read, write and search permission, which its code may
    have taken away (only the worker's own uid needs it: root reads whatever the mode)."""
    if os.geteuid() == 0:
        return
    mode = os.fstat(fd).st_mode
    if mode & 0o700 != 0o700:
        os.fchmod(fd, stat.S_IMODE(mode) | 0o700)


def _open_dir(name: str, parent: int) -> int | None:
    """A descriptor of the folder `name` in `parent`; None when it cannot be read even after
    its owner's permissions are given back (or it changed into something else meanwhile)."""
    try:
        return os.open(name, _DIR, dir_fd=parent)
    except PermissionError:
        pass
    except OSError:
        return None
    try:
        handle = os.open(name, _PATH, dir_fd=parent)
    except OSError:
        return None
    try:
        with contextlib.suppress(OSError):
            mode = os.stat(handle).st_mode
            os.chmod(f"/proc/self/fd/{handle}", stat.S_IMODE(mode) | 0o700)
        return os.open(name, _DIR, dir_fd=parent)
    except OSError:
        return None
    finally:
        os.close(handle)


def growth_refusal(root: Path, quota: Quota, adding: int, *, new_entries: int) -> str | None:
    """For the files tools: why writing `adding` bytes (and `new_entries` new entries) may not
    be done, when it would take the folder past its quota; None when it fits."""
    usage = measure(root, quota)
    grown = FolderUsage(usage.bytes + adding, usage.entries + new_entries, usage.unreadable)
    if not grown.over(quota):
        return None
    return (
        f"the session's files folder is full: {usage.describe()}, and its quota is "
        f"{quota.describe()}; delete files (python_run can) or write less."
    )
