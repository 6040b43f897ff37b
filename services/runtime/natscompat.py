"""Where nats-py and FastStream disagree, made to agree in one place.

nats-py 2.15 and later let a pull subscription's `fetch` end a timeout with the builtin
`TimeoutError` (when the server's "no messages" answer comes after the fetch's own deadline,
as on a busy or just-started process), where it documents, and FastStream's pull consume loop
expects, `nats.errors.TimeoutError`. FastStream suppresses only the latter, so its consume task
died, was restarted, and logged an ERROR with a traceback in every idle service. `fetch` is
wrapped here so that every timeout is `nats.errors.TimeoutError`, which is still a builtin
`TimeoutError` for any caller that catches that.
"""

from __future__ import annotations

import functools
from typing import Any

import nats.errors
from nats.js.client import JetStreamContext

_MARK = "_sidekick_timeouts"


def patch_pull_fetch() -> None:
    """Idempotent; called when a service builds its broker."""
    cls: Any = JetStreamContext.PullSubscription
    original = cls.fetch
    if getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    async def fetch(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await original(self, *args, **kwargs)
        except nats.errors.TimeoutError:
            raise
        except TimeoutError as exc:
            raise nats.errors.TimeoutError from exc

    setattr(fetch, _MARK, True)
    cls.fetch = fetch
