"""Waiting for a process to say it is ready over HTTP: `sidekick up` waits for its gateway's
/readyz, the eval harness for the `sidekick up` it started."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable


def answers_ok(url: str, timeout: float) -> bool:
    """Whether `url` answers 200 now. No answer (refused, timed out) or another status is no."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return bool(resp.status == 200)
    except OSError:  # URLError and HTTPError are OSErrors
        return False


def wait_ok(
    url: str, timeout: float, *, probe_timeout: float, still: Callable[[], bool] = lambda: True
) -> bool:
    """True once `url` answers 200; False when `timeout` seconds pass first, or `still()` (the
    waiting still makes sense) turns false. Tries every 0.2 s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and still():
        if answers_ok(url, probe_timeout):
            return True
        time.sleep(0.2)
    return False
