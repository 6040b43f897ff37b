"""Waiting on observable state, never on the clock alone: `wait_for` polls a condition (a plain
function, or one returning an awaitable) until it holds, and says `what` did not happen."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any


async def wait_for(
    predicate: Callable[[], Any], timeout: float = 30.0, what: str = "condition not met"
) -> None:
    """Wait until `predicate()` (sync or returning an awaitable) is truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        await asyncio.sleep(0.05)
