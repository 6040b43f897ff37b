"""Refusals logged without letting an attacker fill the disk: the first refusal of a kind in an
interval is one line, the rest of that interval are counted and said as one summary line when
the interval ends (or at the next refusal after it, where no event loop runs)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter

SUMMARY_EVERY = 10.0


class Summarised:
    """One logger's refusals, by kind: `say(kind, line, *args)` logs a WARNING line the first
    time a kind is refused in an interval and counts the repeats."""

    def __init__(self, log: logging.Logger, what: str, *, every: float = SUMMARY_EVERY) -> None:
        self.log = log
        self.what = what  # e.g. "poison messages", in the summary line
        self.every = every
        self._counts: Counter[str] = Counter()
        self._since: float | None = None

    def say(self, kind: str, line: str, *args: object) -> None:
        now = time.monotonic()
        if self._since is not None and now - self._since >= self.every:
            self.flush()
        if self._since is None:
            self._since = now
            # No loop running: the next refusal after the interval says it.
            with contextlib.suppress(RuntimeError):
                asyncio.get_running_loop().call_later(self.every, self.flush)
        self._counts[kind] += 1
        if self._counts[kind] == 1:
            self.log.warning(line, *args)

    def flush(self) -> None:
        """The summary of the interval's repeats (nothing when each kind was refused once)."""
        if self._since is None:
            return
        repeats = {kind: n - 1 for kind, n in self._counts.items() if n > 1}
        if repeats:
            parts = ", ".join(f"{n} more {kind}" for kind, n in sorted(repeats.items()))
            self.log.warning(
                "%s in the last %.0f s: %s",
                self.what,
                time.monotonic() - self._since,
                parts,
            )
        self._counts.clear()
        self._since = None
