"""The event loop every service process runs on."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_loop(main: Coroutine[Any, Any, T]) -> T:
    """Run `main` on uvloop (libuv: cheaper I/O and scheduling per message than asyncio's
    selector loop; `python -m bench.ab`), or on asyncio's own loop where uvloop is missing."""
    try:
        import uvloop
    except ImportError:  # e.g. Windows
        return asyncio.run(main)
    return uvloop.run(main)
