"""The one way a test starts Sidekick: `Systems` (the session's `systems` fixture) starts the five
services, each its own process, on the session's locked nats-server, on a module's own server
or on a NATS cluster, with the fake model and the fakes a test names, and stops them after.

    @pytest.fixture(scope="module")
    def priced(systems: Systems, brave: FakeBrave) -> Iterator[System]:
        yield from systems.run(auth=True, brave=brave, SIDEKICK_PRICES="fake-worker=1:2")

`run` takes what most systems differ in by name (`workers`, `tools`, `auth`, the fakes, ...),
anything else as environment variables, and where to run: `nats_url` (another server),
`cluster` (a `ClusterSystem` on a NatsCluster), `services`, `replicas`, `gateways`. And
`restarted`: a system on its module's own server restarted whole, the server included."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from services.runtime.base.children import SERVICES
from services.runtime.bus.natsserver import NatsServer
from tests.support.fakes.brave import FakeBrave
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.fakes.pushover import FakePushover
from tests.support.fakes.sendgrid import FakeSendGrid
from tests.support.gateway_client import tokens_env
from tests.support.harness import System, llm_env
from tests.support.natscluster import ClusterSystem, NatsCluster

# Emails sent without asking: for tests of something else than approvals (tests/approvals/).
SEND_FREELY = "email.send=allow;email.send:unwritten_recipient=allow"
# The providers' keys set empty and their URLs pointed nowhere, so a key in the developer's
# environment can never reach a real API from a test.
NO_KEYS = {
    "BRAVE_SEARCH_API_KEY": "",
    "SENDGRID_API_KEY": "",
    "SENDGRID_FROM_EMAIL": "",
    "SIDEKICK_BRAVE_BASE_URL": "http://127.0.0.1:9",
    "SIDEKICK_SENDGRID_BASE_URL": "http://127.0.0.1:9",
}


@dataclass
class Systems:
    """Starts systems on `nats_url` with the session's fake model, their logs in `logs`."""

    nats_url: str
    llm: FakeOpenAI
    logs: Path

    def env(
        self,
        *,
        llm: FakeOpenAI | Literal[False] | None = None,
        keyless: bool = False,
        workers: str | None = None,
        tools: str | None = None,
        auth: bool = False,
        brave: FakeBrave | None = None,
        sendgrid: FakeSendGrid | None = None,
        pushover: FakePushover | None = None,
        approvals: str | None = None,
        variables: Mapping[str, str] | None = None,
        **env: str,
    ) -> dict[str, str]:
        """The services' environment: the model (`llm`: another fake, or False for none), no
        provider keys (`keyless`: NO_KEYS), `workers` (SIDEKICK_WORKERS), the TOOLS worker with
        a model of its own (`tools`, its name), `auth` (a token per principal of
        gateway_client.py), the fakes' keys and URLs, the approval policy, then `variables` and
        `env` (variables, in capitals)."""
        wrong = [name for name in env if not name.isupper()]
        if wrong:
            raise TypeError(f"not an option, nor an environment variable: {wrong}")
        full = {} if llm is False else llm_env((llm or self.llm).base_url)
        if keyless:
            full.update(NO_KEYS)
        if tools is not None:
            full["SIDEKICK_WORKERS"] = "GENERAL,TOOLS"
            full["SIDEKICK_WORKER_LLM_MODEL"] = tools
        if workers is not None:
            full["SIDEKICK_WORKERS"] = workers
        if auth:
            full["SIDEKICK_AUTH_TOKENS"] = tokens_env()
        for fake in (brave, sendgrid, pushover):
            if fake is not None:
                full.update(fake.env())
        if approvals is not None:
            full["SIDEKICK_APPROVALS"] = approvals
        return {**full, **(variables or {}), **env}

    def run(
        self,
        *,
        nats_url: str | None = None,
        cluster: NatsCluster | None = None,
        namespace: str | None = None,
        service_urls: dict[str, str] | None = None,
        services: tuple[str, ...] = SERVICES,
        replicas: int = 1,
        gateways: int = 1,
        timeout: float | None = None,
        **options: Any,
    ) -> Iterator[System]:
        """A started system, stopped when the generator is closed (a fixture's `yield from`);
        `options` as `env` takes them."""
        url = nats_url or self.nats_url
        system: System
        if cluster is None:
            system = System(url, self.env(**options), self.logs)
        else:
            urls = service_urls or {}
            system = ClusterSystem(url, self.env(**options), self.logs, service_urls=urls)
            system.cluster = cluster
        if namespace is not None:
            system.namespace = namespace
        try:
            yield system.start_all(timeout, services, replicas, gateways)
        finally:
            system.stop()

    start = contextmanager(run)  # `run` as a `with` block, for a system a test starts itself


def sending_freely(systems: Systems, sendgrid: FakeSendGrid, **options: Any) -> Iterator[System]:
    """A system whose email worker sends through `sendgrid` without asking (SEND_FREELY): for
    tests of something else than approvals; `options` as `Systems.run` takes them."""
    return systems.run(workers="GENERAL,EMAIL", sendgrid=sendgrid, approvals=SEND_FREELY, **options)


def on_first_node(
    systems: Systems, cluster: NatsCluster, sendgrid: FakeSendGrid, namespace: str, **env: str
) -> Iterator[System]:
    """`sending_freely`'s system on `cluster`, every service given the first node only (the
    others it learns from the cluster): the worst case when that node is lost. Deliveries and
    model calls wait out a fault (SIDEKICK_MAX_DELIVER 20, SIDEKICK_LLM_TIMEOUT 90 s)."""
    return sending_freely(
        systems,
        sendgrid,
        nats_url=cluster.nodes[0].url,
        cluster=cluster,
        namespace=namespace,
        variables={"SIDEKICK_MAX_DELIVER": "20", "SIDEKICK_LLM_TIMEOUT": "90", **env},
    )


async def restarted(system: System, nats: NatsServer) -> None:
    """`system` stopped, `nats` (its own server, say `own_nats`) stopped and started again on the
    same port, then every service of `system` started again."""
    system.stop()
    port = nats.port
    nats.stop()
    nats.port = port
    await asyncio.to_thread(nats.start)
    await asyncio.to_thread(system.start_all)
