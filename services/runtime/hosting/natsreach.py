"""A service and its NATS servers: waiting for one to answer before starting, refusing to start
(with one clear line) when every server refuses its login, and exiting when the bus has been gone
longer than `SIDEKICK_NATS_LOST_EXIT_AFTER`, so that `sidekick up` or Kubernetes starts it afresh.

Exit statuses: 78 (EX_CONFIG) when the login is refused at start, 75 (EX_TEMPFAIL) when the bus
was lost for too long."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
import urllib.parse
from collections.abc import Callable

import nats
import nats.errors

from services.runtime.bus.natslogin import Login, variable
from services.runtime.bus.natswatch import Watch

log = logging.getLogger("sidekick")

LOGIN_REFUSED = 78
BUS_LOST = 75


def _addresses(login: Login) -> list[tuple[str, int]]:
    found = []
    for server in login.servers:
        parsed = urllib.parse.urlsplit(server)
        found.append((parsed.hostname or "127.0.0.1", parsed.port or 4222))
    return found


def refused_line(service: str, login: Login, server: str) -> str:
    """What a service says when NATS refuses its login: which variables give it its own."""
    user, pw, creds = (variable(w, service) for w in ("USER", "PASSWORD", "CREDS"))
    if login.anonymous:
        return (
            f"{service}: NATS at {server} requires a login and this service has none: this "
            f"server has users (Sidekick's: one per service); give this service its own with "
            f"{user} and {pw} (or {creds}); `sidekick nats-config` writes the server's side"
        )
    return (
        f"{service}: NATS at {server} refused {login.who} (authorization violation): check "
        f"{user} / {pw} (or {creds}) against the server's users (`sidekick nats-config`)"
    )


async def _try_login(login: Login, seconds: float) -> str | None:
    """None when a server accepts the login; "refused" when one refuses it; else "down"."""
    seen: list[Exception] = []

    async def collect(exc: Exception) -> None:
        seen.append(exc)

    try:
        async with asyncio.timeout(seconds):
            nc = await nats.connect(
                **login.options(),
                allow_reconnect=False,
                max_reconnect_attempts=1,
                connect_timeout=min(seconds, 5.0),
                error_cb=collect,
                name="sidekick-login-check",
            )
    except (nats.errors.Error, OSError, TimeoutError) as exc:
        seen.append(exc)
        refused = any(isinstance(e, nats.errors.AuthorizationError) for e in seen) or any(
            "authorization" in str(e).lower() for e in seen
        )
        return "refused" if refused else "down"
    await nc.close()
    return None


async def wait_for_nats(login: Login, service: str, *, every: float = 2.0) -> int | None:
    """Wait until a NATS server accepts this service's login, saying so in the log (a service
    started before its NATS server would otherwise hang in silence). None when one did; an exit
    status when the process should end: 0 if asked to stop meanwhile, `LOGIN_REFUSED` when the
    servers refuse the login."""
    addresses = _addresses(login)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        attempt = 0
        while not stop.is_set():
            for host, port in addresses:
                try:
                    _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), every)
                except (OSError, TimeoutError):
                    continue
                writer.close()
                outcome = await _try_login(login, every * 2)
                if outcome == "refused":
                    log.error("%s", refused_line(service, login, f"{host}:{port}"))
                    return LOGIN_REFUSED
                if outcome is None:
                    if attempt:
                        log.info("%s: NATS at %s:%d is reachable now", service, host, port)
                    return None
            attempt += 1
            if attempt == 1 or attempt % 15 == 0:
                where = ", ".join(f"{h}:{p}" for h, p in addresses)
                log.warning(
                    "%s: waiting for NATS at %s (set SIDEKICK_NATS_URL; `sidekick up` starts one)",
                    service,
                    where,
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every)
        log.info("%s: stopped while waiting for NATS", service)
        return 0
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


def liveness(watch: Watch | None, limit: float) -> tuple[bool, str]:
    """What /healthz says about the bus: alive, and a word on how long it has been gone."""
    lost = watch.lost_for() if watch is not None else 0.0
    if lost <= 0:
        return True, "connected"
    if limit <= 0:
        return True, f"lost {lost:.0f} s ago"
    return lost < limit, f"lost {lost:.0f} s ago; the process exits after {limit:g} s"


async def exit_when_lost(
    watch: Watch, service: str, limit: float, stop: Callable[[int], None]
) -> None:
    """Run for the life of the service: once the bus has been gone `limit` seconds, one clear
    line and `stop(BUS_LOST)`."""
    while True:
        await asyncio.sleep(min(1.0, limit / 4))
        lost = watch.lost_for()
        if lost >= limit:
            log.error(
                "%s: NATS has been unreachable for %.0f s (SIDEKICK_NATS_LOST_EXIT_AFTER=%g; "
                "servers %s); exiting so that it is started afresh",
                service,
                lost,
                limit,
                watch.login.where,
            )
            stop(BUS_LOST)
            return


def hard_exit_later(status: int, after: float = 15.0) -> None:
    """A backstop: end the process with `status` if a clean stop takes longer than `after`
    (its shutdown may wait on a bus that is not there)."""
    timer = threading.Timer(after, os._exit, args=(status,))
    timer.daemon = True
    timer.start()
