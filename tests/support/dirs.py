"""Folders for the sandbox's session files. As root, each session's code runs as a uid of its
own, which must be able to reach the folder: pytest's temporary folders are private (0700), so
these live in a fresh folder under the system's temp dir that others may search (0711)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def searchable_dir(prefix: str = "sidekick-files-") -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix=prefix))
    root.chmod(0o711)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)
