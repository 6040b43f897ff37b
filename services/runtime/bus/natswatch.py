"""A NATS connection that outlives any outage, and says what happens to it in a few lines.

nats-py reports each failed (re)connection to an error callback. FastStream wraps that callback
and re-raises the errors it deems unrecoverable ("Authorization Violation", "stale connection",
...) so that a first connection fails fast; raised inside nats-py's reconnect task, that error
ends the task, and the process stays alive with no connection, forever (a cluster node that
refused a login the client could not give it was enough). `Watch.on_error` replaces that
wrapper: it never raises, and says each cause once a minute at most; the client keeps trying
every server. `Watch.lost_for` is how long the bus has been gone, for the host's watchdog
(`SIDEKICK_NATS_LOST_EXIT_AFTER`) and its liveness probe. A server that hangs is noticed by
pings it leaves unanswered (`SIDEKICK_NATS_PING_INTERVAL`, `SIDEKICK_NATS_MAX_OUTSTANDING_PINGS`):
the client drops it as if the connection were lost, so the hang counts from then, and moves on
to another server.
"""

from __future__ import annotations

import logging
import time
import weakref
from typing import Any

from faststream.nats import NatsBroker

from services.runtime.bus.natslogin import Login

log = logging.getLogger("sidekick.nats")

SAY_AGAIN_AFTER = 60.0  # seconds before the same cause is logged again
_WATCHES: weakref.WeakKeyDictionary[NatsBroker, Watch] = weakref.WeakKeyDictionary()


def cause(exc: BaseException) -> str:
    """What went wrong, without what changes from one try to the next (the server's address)."""
    text = str(exc).removeprefix("nats: ").strip("'\" ").lower()
    if "authorization" in text:
        return "authorization violation"
    if isinstance(exc, OSError) or "connect call failed" in text or "refused" in text:
        return "connection refused"
    return f"{type(exc).__name__}: {text[:120]}" if text else type(exc).__name__


class Watch:
    """The callbacks of one service's NATS connection, and since when it has been lost."""

    def __init__(self, service: str, login: Login) -> None:
        self.service = service
        self.login = login
        self.lost_since: float | None = None
        self.ever_connected = False
        self._said: dict[str, float] = {}

    def lost_for(self) -> float:
        """Seconds since the connection was lost; 0 while connected."""
        return 0.0 if self.lost_since is None else time.monotonic() - self.lost_since

    async def on_error(self, exc: Exception) -> None:
        """Log the cause (once a minute at most); never raise: the client keeps trying."""
        why = cause(exc)
        now = time.monotonic()
        if now - self._said.get(why, -SAY_AGAIN_AFTER) < SAY_AGAIN_AFTER:
            return
        self._said[why] = now
        if why == "authorization violation":
            log.warning(
                "%s: a NATS server refused %s (authorization violation); still trying every "
                "server of %s (a node without this user? see docs/operations.md)",
                self.service,
                self.login.who,
                self.login.where,
            )
        else:
            log.warning("%s: NATS: %s; still trying %s", self.service, why, self.login.where)

    async def on_disconnected(self) -> None:
        if self.lost_since is None and self.ever_connected:
            self.lost_since = time.monotonic()
            log.warning("%s: NATS connection lost; reconnecting to any server", self.service)

    async def on_reconnected(self) -> None:
        self.ever_connected = True
        if self.lost_since is not None:
            log.info("%s: NATS is back after %.1f s", self.service, self.lost_for())
        self.lost_since = None
        self._said.clear()

    def connected(self) -> None:
        """The first connection is made."""
        self.ever_connected = True
        self.lost_since = None


def cluster_broker(
    login: Login,
    watch: Watch,
    *,
    ping_interval: float = 2.0,
    max_outstanding_pings: int = 3,
    **kwargs: Any,
) -> NatsBroker:
    """A NatsBroker that tries every server with `login`, whose reconnect never dies, and that
    leaves a hung server (no answer to `max_outstanding_pings` pings `ping_interval` apart) for
    another: a stopped process keeps its sockets open, so nothing else would tell."""
    connect = login.options()
    connect.update(ping_interval=ping_interval, max_outstanding_pings=max_outstanding_pings)
    broker = NatsBroker(
        connect.pop("servers"),
        disconnected_cb=watch.on_disconnected,
        reconnected_cb=watch.on_reconnected,
        **kwargs,
    )
    # What FastStream passes to `nats.connect`: the login goes there as nats-py takes it, and
    # FastStream's error wrapper (see the docstring), which would re-raise inside the
    # reconnect task, is replaced by one that never does.
    options: dict[str, Any] = broker._connection_kwargs
    assert "error_cb" in options, "FastStream no longer passes error_cb to nats.connect"
    options.update(connect, error_cb=watch.on_error)
    _WATCHES[broker] = watch
    return broker


def watch_of(broker: NatsBroker) -> Watch | None:
    """The watch of a broker made by `cluster_broker` (None for another broker)."""
    return _WATCHES.get(broker)
