"""Round two of the bus's walls, attacked with a service's own NATS credentials: no service can
create a durable consumer through the permission it has for watching a bucket."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator

import nats.errors
import pytest
from nats.js.api import ConsumerConfig
from nats.js.errors import APIError

from contracts import Subjects
from services.runtime.bus.natsauth import ADMIN, SERVICES, Credentials
from services.runtime.bus.natsserver import NatsServer
from tests.support.natsusers import User, locked_server, users_of

NAMESPACE = "walls2"


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NatsServer, Credentials]]:
    creds = Credentials.generate((*SERVICES, ADMIN))
    server = locked_server(tmp_path_factory.mktemp("walls2"), NAMESPACE, creds)
    yield server, creds
    server.stop()


@pytest.fixture
async def users(locked: tuple[NatsServer, Credentials]) -> AsyncIterator[dict[str, User]]:
    server, creds = locked
    async with users_of(server.url, creds, NAMESPACE) as connected:
        yield connected


async def test_a_watcher_cannot_create_a_durable_consumer_on_the_bucket_it_watches(
    users: dict[str, User],
) -> None:
    s = Subjects(NAMESPACE)
    admin = users[ADMIN].nc.jetstream()
    for service, bucket in (("gateway", "index"), ("orchestrator", "cache")):
        stream = f"KV_{s.bucket(bucket)}"
        js = users[service].nc.jetstream()
        everything = f"$KV.{s.bucket(bucket)}.>"
        for config in (
            ConsumerConfig(name="evil", durable_name="evil"),  # CONSUMER.CREATE.<stream>.evil
            ConsumerConfig(name="evil", durable_name="evil", filter_subject=everything),
            ConsumerConfig(durable_name="evil"),  # CONSUMER.DURABLE.CREATE.<stream>.evil
        ):
            with pytest.raises((nats.errors.TimeoutError, APIError)):
                await js.add_consumer(stream, config, timeout=1)
        # The one creation left to it is an ephemeral one: the server refuses a durable there.
        request = {"stream_name": stream, "config": {"durable_name": "evil"}}
        reply = await users[service].nc.request(
            f"$JS.API.CONSUMER.CREATE.{stream}", json.dumps(request).encode(), timeout=2
        )
        assert "durable" in json.loads(reply.data)["error"]["description"]
        assert [c.name for c in await admin.consumers_info(stream)] == []
        # Watching, what the permission is for, still works.
        kv = await js.key_value(s.bucket(bucket))
        watcher = await kv.watchall()
        await (await admin.key_value(s.bucket(bucket))).put("k", b"v")
        async for entry in watcher:
            if entry is not None and entry.key == "k":
                break
        await watcher.stop()  # type: ignore[no-untyped-call]
