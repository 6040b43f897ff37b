"""Folders for the sandbox's session files. As root, each session's code runs as a uid of its
own, which must be able to reach the folder: pytest's temporary folders are private (0700), so
these live in a fresh folder under the system's temp dir that others may search (0711)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest


@contextmanager
def searchable_dir(prefix: str = "sidekick-files-") -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix=prefix))
    root.chmod(0o711)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def searchable_root() -> Any:
    """A module-scoped fixture: one searchable folder for the module's session folders; the
    fixture's name is the name it is bound to."""

    def root() -> Iterator[Path]:
        with searchable_dir() as path:
            yield path

    return pytest.fixture(root, scope="module")
