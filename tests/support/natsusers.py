"""A nats-server locked with one user per service, as `sidekick nats-config` writes it, and the
attack tests' connections as those users (tests/walls/): each collects the server's permission
errors, and says whether a subscription or a publish was refused. `as_role`: a connection to a
running system's server as one of its roles (a compromised process of that role), and
`publish_as`, its JetStream publish under a dedupe id of its choosing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from nats.aio.client import Client as NATS

from services.runtime.base.settings import Settings
from services.runtime.bus.natsauth import ADMIN, SERVICES, Credentials, inbox_prefix, write_config
from services.runtime.bus.natsserver import NatsServer
from services.runtime.bus.topology import bootstrap
from tests.support.harness import System


def locked_server(directory: Path, namespace: str, creds: Credentials) -> NatsServer:
    config = write_config(directory / "nats.conf", namespace, admin=ADMIN in creds.passwords)
    return NatsServer(store_dir=directory / "js", config_file=config, env=creds.env()).start()


class User:
    """A NATS connection as one user, collecting the server's permission errors."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.nc = NATS()

    async def connect(self, url: str, user: str) -> User:
        async def on_error(exc: Exception) -> None:
            self.errors.append(str(exc))

        prefix = inbox_prefix(user) if user in SERVICES else "_INBOX"
        await self.nc.connect(url, error_cb=on_error, max_reconnect_attempts=0, inbox_prefix=prefix)
        return self

    async def violation(self, wanted: str) -> bool:
        wanted = wanted.lower()  # nats-py lower-cases the server's message
        for _ in range(100):
            if any(wanted in e.lower() for e in self.errors):
                return True
            await asyncio.sleep(0.02)
        return False

    async def refused_subscription(self, subject: str) -> bool:
        await self.nc.subscribe(subject)
        await self.nc.flush()
        return await self.violation(f'permissions violation for subscription to "{subject}"')

    async def denied(self, subject: str) -> bool:
        """Publish; True once the server reported a publish violation for `subject`."""
        await self.nc.publish(subject, b"{}", reply=f"{self.nc._inbox_prefix.decode()}.x")
        await self.nc.flush()
        return await self.violation(f'permissions violation for publish to "{subject}"')


@asynccontextmanager
async def users_of(
    url: str, creds: Credentials, namespace: str, replicas: int = 1
) -> AsyncIterator[dict[str, User]]:
    """Every service's user and the admin connected to `url`, after the admin's bootstrap of
    `namespace` (streams at `replicas`); closed after."""
    connected = {u: await User().connect(creds.url(url, u), u) for u in (*SERVICES, ADMIN)}
    settings = Settings(namespace=namespace, stream_replicas=replicas)
    await bootstrap(connected[ADMIN].nc.jetstream(), settings)
    try:
        yield connected
    finally:
        for user in connected.values():
            await user.nc.close()


@asynccontextmanager
async def as_role(system: System, role: str) -> AsyncIterator[NATS]:
    """A connection to `system`'s server with `role`'s own credentials, as a compromised
    process of that role would have; closed after."""
    assert role in system.service_urls, "the test server must be locked (one user a role)"
    client = NATS()
    await client.connect(system.service_urls[role], inbox_prefix=inbox_prefix(role))
    try:
        yield client
    finally:
        await client.close()


async def publish_as(nc: NATS, subject: str, data: bytes, msg_id: str) -> None:
    """Store `data` on `subject` under the dedupe id `msg_id`, which must be free."""
    ack = await nc.jetstream().publish(subject, data, headers={"Nats-Msg-Id": msg_id}, timeout=5)
    assert not ack.duplicate, f"{msg_id} was taken already"
