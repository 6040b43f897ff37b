"""`sidekick up --nats-url <list>` on a 3-node cluster: every service runs as its own NATS user,
given in the environment apart from the URL (SIDEKICK_<SERVICE>_NATS_USER / _PASSWORD), and
a chat goes through."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from services.runtime.bus.natsauth import ADMIN, SERVICES
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.harness import Client
from tests.support.natscluster import NatsCluster
from tests.support.upproc import Up


def test_sidekick_up_with_a_server_list_runs_each_service_as_its_own_user(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    cluster = NatsCluster(tmp_path / "cluster", namespace="sidekick").start()
    try:
        env = {"SIDEKICK_STREAM_REPLICAS": "3"}
        for user in (*SERVICES, ADMIN):
            env.update(cluster.login_env(user))
        up = Up(tmp_path, fake_llm.base_url, env, extra=["--nats-url", cluster.url])
        try:
            up.wait_for("Sidekick is up", timeout=120)

            async def hello() -> str:
                async with Client(up.ws_url) as client:
                    return (await client.ask("hello")).text

            assert asyncio.run(hello())
            users = {}
            for node in cluster.nodes:
                for conn in node.monitor("/connz?auth=true&limit=4096")["connections"]:
                    name = str(conn.get("name", ""))
                    if name.startswith("sidekick-") and name != "sidekick-login-check":
                        users[name] = conn.get("authorized_user")
            assert users == {f"sidekick-{s}": s for s in SERVICES}, users
            output = up.output()
            assert "has no NATS user of its own" not in output
            assert not [p for p in cluster.creds.passwords.values() if p in output]
        finally:
            up.interrupt(signal.SIGTERM)
    finally:
        cluster.stop()
