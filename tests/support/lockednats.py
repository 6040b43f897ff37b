"""The test session's nats-server, locked the way `sidekick up` locks its own: every System
that starts on it gets, for its namespace, one NATS user per service with exactly that role's
permissions (services/runtime/bus/natsauth.py), and the bootstrap step runs as the admin user. So
every end-to-end test also proves the services need no more rights than they are given.

Systems register their namespace (`users_for`); the config is rewritten and the server reloads
it (SIGHUP). Tests that talk to NATS themselves get the admin URL (`LockedNats.url`).
"""

from __future__ import annotations

import asyncio
import signal
import time
from dataclasses import dataclass, field

import nats.errors
from nats.aio.client import Client as NATS

from services.runtime.bus.natsauth import (
    ADMIN,
    SERVICES,
    new_password,
    render_shared,
    shared_user,
    with_credentials,
)
from services.runtime.bus.natsserver import NatsServer

_LOCKED: dict[str, LockedNats] = {}


@dataclass
class LockedNats(NatsServer):
    passwords: dict[str, str] = field(default_factory=lambda: {ADMIN: new_password()})
    namespaces: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        """The admin's URL (what a test that talks to NATS itself uses)."""
        return with_credentials(self.plain_url, ADMIN, self.passwords[ADMIN])

    @property
    def plain_url(self) -> str:
        return f"nats://{self.host}:{self.port}"

    def start(self, timeout: float = 20.0) -> LockedNats:
        assert self.config_file is not None
        self._write()
        super().start(timeout)
        _LOCKED[self.url] = self
        return self

    def _write(self) -> None:
        assert self.config_file is not None
        self.config_file.parent.mkdir(parents=True, exist_ok=True)
        self.config_file.write_text(render_shared(self.namespaces, self.passwords))
        self.config_file.chmod(0o600)

    def add(self, namespace: str) -> dict[str, str]:
        """Users for `namespace` (made once); each service's URL."""
        if namespace not in self.namespaces:
            for service in SERVICES:
                self.passwords[shared_user(service, namespace)] = new_password()
            self.namespaces.append(namespace)
            self._write()
            assert self.process is not None
            self.process.send_signal(signal.SIGHUP)
            asyncio.run(self._wait_for(shared_user(SERVICES[0], namespace)))
        return {
            service: with_credentials(
                self.plain_url,
                shared_user(service, namespace),
                self.passwords[shared_user(service, namespace)],
            )
            for service in SERVICES
        }

    async def _wait_for(self, user: str, timeout: float = 10.0) -> None:
        """Until the reloaded config lets `user` in."""
        deadline = time.monotonic() + timeout
        url = with_credentials(self.plain_url, user, self.passwords[user])
        while True:
            nc = NATS()
            try:
                await nc.connect(url, allow_reconnect=False, connect_timeout=2, error_cb=_quiet)
                await nc.close()
                return
            except (nats.errors.Error, OSError):
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.05)


async def _quiet(_: Exception) -> None:
    pass


def users_for(nats_url: str, namespace: str) -> dict[str, str] | None:
    """Each service's URL for `namespace` when `nats_url` is a locked test server; else None."""
    locked = _LOCKED.get(nats_url)
    return None if locked is None else locked.add(namespace)
