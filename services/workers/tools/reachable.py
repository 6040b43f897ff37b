"""The files folder as root: each session's code runs as a uid of its own (python_sandbox.py),
which must be able to walk to its folder. The default folder, `<data dir>/files`, sits in the
clone, and a clone under a private home (`/root`, mode 0700) cannot be walked by that uid. With
no SIDEKICK_FILES_ROOT set, root then keeps the files where any uid may pass: a folder of its
own under SHARED_BASE (mode 0711: passable, not listable), one per data folder."""

from __future__ import annotations

import hashlib
import logging
import os
import stat
from pathlib import Path

log = logging.getLogger("sidekick.tools")

SHARED_BASE = Path("/var/lib/sidekick")


def passable(path: Path) -> bool:
    """Whether a uid of no group may walk every existing folder on the way to `path`."""
    for folder in [path, *path.parents]:
        try:
            mode = folder.stat().st_mode
        except FileNotFoundError:
            continue  # made later, by us, passable
        if not mode & stat.S_IXOTH:
            return False
    return True


def files_folder(default: Path) -> Path:
    """`default`, or, as root where a session's uid could not reach it, a passable folder."""
    default = default.absolute()
    if os.geteuid() != 0 or passable(default):
        return default
    digest = hashlib.sha256(str(default).encode()).hexdigest()[:12]
    shared = SHARED_BASE / f"files-{digest}"
    try:
        for folder in (SHARED_BASE, shared):
            folder.mkdir(mode=0o711, exist_ok=True)
            folder.chmod(0o711)
    except OSError as exc:
        log.warning(
            "the files folder %s cannot be reached by the sandbox's uids, and %s could not be "
            "made (%s): set SIDEKICK_FILES_ROOT to a folder whose parents are searchable",
            default,
            shared,
            exc,
        )
        return default
    if passable(shared):
        return shared
    return default
