"""The official AG-UI client, `@ag-ui/client` 1.0.0 (`HttpAgent`), against the real system,
driven as its docs show by a Node script (agui_client/flows.mjs, installed by the README's test
command, scripts/test: `npm ci`): a run; re-attaching after a dropped connection and after the
gateway was SIGKILLed and started again, with no event missed and none twice; a frontend tool
round trip that survives a restart of every service while the request waits for the app; an
approval interrupt whose expiresAt the client itself enforces; and what abortRun() does, with
and without the cancelOnDisconnect opt-in. Every event the client applied passed its own
schema checks and verifier: a stream it refused would fail its run."""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from services.runtime.bus.natsserver import NatsServer
from tests.support.agui import BOOKING, read
from tests.support.fakes.openai_server import FakeOpenAI, Reply, tool_call
from tests.support.gateway_client import bearer, token, tokens_env
from tests.support.harness import SERVICES, System, llm_env
from tests.support.scripts import books, tool_results

CLIENT = Path(__file__).parent / "agui_client"
WHO = "ella"
PAY = {
    "name": "pay_deposit",
    "description": "Charge the deposit in the app",
    "parameters": {"type": "object", "properties": {"amount": {"type": "number"}}},
}
APPROVAL_SECONDS = 8


@pytest.fixture(scope="module")
def agui_system(nats_server: NatsServer, fake_llm: FakeOpenAI, logs_dir: Path) -> Iterator[System]:
    """A system that needs tokens and asks before the app's `pay_deposit` runs."""
    env = {
        **llm_env(fake_llm.base_url),
        "SIDEKICK_AUTH_TOKENS": tokens_env(),
        "SIDEKICK_APPROVALS": "pay_deposit=ask",
        "SIDEKICK_APPROVAL_TIMEOUT": str(APPROVAL_SECONDS),
    }
    with System(nats_server.url, env, logs_dir).start_all() as system:
        yield system


class Flow:
    """One run of flows.mjs: the lines it writes, and go-aheads to it."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.errors = b""
        self._stderr = asyncio.create_task(self._drain())

    async def _drain(self) -> None:
        assert self.proc.stderr is not None
        self.errors = await self.proc.stderr.read()

    async def line(self, timeout: float = 90) -> dict[str, Any]:
        assert self.proc.stdout is not None
        raw = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        if not raw:
            await asyncio.wait_for(self._stderr, 10)
            raise AssertionError(f"flows.mjs ended early:\n{self.errors.decode()[-3000:]}")
        found: dict[str, Any] = json.loads(raw)
        return found

    async def go(self) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(b"go\n")
            await self.proc.stdin.drain()
        except ConnectionResetError as exc:
            await asyncio.wait_for(self._stderr, 10)
            ended = f"flows.mjs ended early:\n{self.errors.decode()[-3000:]}"
            raise AssertionError(ended) from exc


@asynccontextmanager
async def flow(system: System, name: str, **cfg: Any) -> AsyncIterator[Flow]:
    if shutil.which("node") is None:
        pytest.fail("node (20 or later) is needed for the @ag-ui/client tier")
    if not (CLIENT / "node_modules" / "@ag-ui" / "client").is_dir():
        pytest.fail(f"@ag-ui/client is not installed: npm ci --prefix {CLIENT} (scripts/test)")
    config = {"flow": name, "url": f"{system.http_url}/ag-ui", "token": token(WHO), **cfg}
    proc = await asyncio.create_subprocess_exec(
        "node",
        str(CLIENT / "flows.mjs"),
        json.dumps(config),
        cwd=CLIENT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    running = Flow(proc)
    try:
        yield running
        assert await asyncio.wait_for(proc.wait(), 60) == 0, running.errors.decode()[-3000:]
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def ids() -> dict[str, str]:
    return {"threadId": "t-" + uuid.uuid4().hex[:10], "runId": "run-" + uuid.uuid4().hex[:10]}


async def replayed(system: System, run_id: str) -> list[dict[str, Any]]:
    """The whole run, read again from its start (as a client without an id would)."""
    async with (
        httpx.AsyncClient(base_url=system.http_url, timeout=60, headers=bearer(WHO)) as http,
        http.stream("GET", f"/ag-ui/runs/{run_id}") as response,
    ):
        return [e.json for e in await read(response)]


def seen_once_each(before: list[dict[str, Any]], rest: list[dict[str, Any]], whole: Any) -> None:
    """The events applied before the drop and after the re-attach are the run's, each once."""
    assert rest[0] == {"type": "RUN_STARTED", "id": None, "name": None}  # valid from its start
    framing = [e for e in rest if e["id"] is None]
    assert rest[: len(framing)] == framing  # the framing first, without ids
    applied = [e["id"] for e in before + rest if e["id"] is not None]
    assert applied == [e["metadata"]["sidekick"]["eventId"] for e in whole]
    assert rest[-1]["type"] == "RUN_FINISHED"


def holding(fake_llm: FakeOpenAI, answer: str) -> threading.Event:
    release = threading.Event()
    fake_llm.script("fake-worker", lambda body: Reply(answer, wait=release))
    return release


@dataclass
class Held:
    """A re-attach flow whose worker's answer waits on `release`."""

    system: System
    run: Flow
    release: threading.Event
    run_id: str
    answer: str

    async def goes_on(self) -> dict[str, Any]:
        """The worker's answer released and the client told to go on: what it writes next."""
        self.release.set()
        await self.run.go()
        return await self.run.line()

    async def re_attached_once(self, got: dict[str, Any]) -> None:
        """The client re-attached, saw every event of the run once, and its answer whole."""
        assert got["again"] == "ok"
        seen_once_each(got["before"], got["rest"], await replayed(self.system, self.run_id))
        assert got["texts"] == [self.answer]


@asynccontextmanager
async def held_flow(
    system: System, fake_llm: FakeOpenAI, name: str, text: str, answer: str
) -> AsyncIterator[Held]:
    """flows.mjs's `name` flow sending `text`, routed, stopping at its first attempt; the
    worker's `answer` waits until released, at the latest on the way out."""
    release = holding(fake_llm, answer)
    cfg = ids()
    try:
        async with flow(system, name, text=text, until="attempt 1", **cfg) as run:
            yield Held(system, run, release, cfg["runId"], answer)
    finally:
        release.set()


async def test_a_run_through_the_official_client(agui_system: System) -> None:
    async with flow(agui_system, "direct", text="Hello, how are you?", **ids()) as run:
        got = await run.line()
    kinds = [e["type"] for e in got["seen"]]
    assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_FINISHED"
    assert got["texts"] == ["Hello there! How can I help you today?"]
    assert got["result"]["route"] == "direct"
    assert got["state"]["status"] == "completed"


async def test_the_client_re_attaches_after_a_dropped_connection(
    agui_system: System, fake_llm: FakeOpenAI
) -> None:
    drop = ("drop", "Please route: slow work", "Done at last.")
    async with held_flow(agui_system, fake_llm, *drop) as held:
        dropped = await held.run.line()
        assert dropped["dropped"]
        got = await held.goes_on()  # the answer comes while no client is connected
    await held.re_attached_once(got)  # the client's message, whole and once


async def test_the_client_re_attaches_after_the_gateway_is_killed(
    agui_system: System, fake_llm: FakeOpenAI
) -> None:
    kill = ("kill", "Please route: survive a crash", "Survived.")
    async with held_flow(agui_system, fake_llm, *kill) as held:
        await held.run.line()
        agui_system.kill("gateway")  # mid-stream, with no goodbye
        await held.run.go()
        dropped = await held.run.line()
        assert dropped["error"]  # the client saw its stream die
        await asyncio.to_thread(agui_system.restart, "gateway")
        got = await held.goes_on()
    await held.re_attached_once(got)
    # The client's teardown rethrows the dead connection's error, unhandled (flows.mjs says
    # why); nothing else went unhandled.
    assert set(got["unhandled"]) <= {"terminated"}


async def test_a_frontend_tool_round_trip_survives_a_restart_of_every_service(
    agui_system: System, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script("fake-worker", books)
    page = [{"description": "The page the user is on", "value": "Trattoria Roma"}]
    cfg = {"threadId": ids()["threadId"], "tool": BOOKING, "context": page, "result": "confirmed"}
    async with flow(agui_system, "tools", text="Book a table for two at seven", **cfg) as run:
        first = await run.line()
        assert first["pending"] == ["call_book_1"]
        assert first["call"]["function"]["name"] == "confirm_booking"
        assert json.loads(first["call"]["function"]["arguments"]) == {"people": 2, "time": "19:00"}
        for name in SERVICES:  # while the request waits for the app: every service, killed
            agui_system.kill(name)
        for name in SERVICES:
            agui_system.launch(name)
        await asyncio.to_thread(agui_system.wait_ready, 60)
        await run.go()
        got = await run.line()
    assert got["second"][0]["type"] == "RUN_STARTED"
    assert got["texts"][-1] == "Booked: confirmed"
    assert got["result"]["status"] == "completed"
    assert got["replay"].startswith("HTTP 409")  # the same result again resumes nothing
    assert len(fake_llm.chat_calls("fake-worker")) == 2  # the model went on exactly once


def pays(body: dict[str, Any]) -> Reply | str:
    """Ask the app to charge the deposit; told it was declined, say so."""
    if tool_results(body):
        return "The deposit was not paid."
    return Reply(
        tool_calls=[tool_call("pay_deposit", {"amount": 20}, f"call_{uuid.uuid4().hex[:8]}")]
    )


async def test_an_approval_interrupt_carries_an_expiry_that_the_client_enforces(
    agui_system: System, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script("fake-worker", pays)
    cfg = {"threadId": ids()["threadId"], "otherThreadId": ids()["threadId"], "tool": PAY}
    async with flow(agui_system, "approval", text="Pay the deposit", **cfg) as run:
        got = await run.line(timeout=120)
    interrupt = got["interrupt"]
    assert interrupt["reason"] == "approval_required"
    assert interrupt["metadata"]["approval"]["action"] == "pay_deposit"  # the <name> rule asked
    approval = interrupt["metadata"]["approval"]
    expires = datetime.fromisoformat(interrupt["expiresAt"])
    assert expires == datetime.fromisoformat(approval["expires_at"])  # the approval's own expiry
    opened = datetime.fromisoformat(approval["created_at"])
    assert (expires - opened).total_seconds() == pytest.approx(APPROVAL_SECONDS, abs=1)
    assert len(got["pending"]) == 1  # approved: the call went to the app
    assert got["approved"][-1]["type"] == "RUN_FINISHED"
    assert got["late"]["expiresAt"]
    assert "expired" in got["tooLate"]  # the client's own check refused the late answer


async def test_abort_run_leaves_the_run_going_unless_the_client_opted_in(
    agui_system: System, fake_llm: FakeOpenAI
) -> None:
    release = holding(fake_llm, "Finished anyway.")
    opted, plain = ids(), ids()

    async def abort_run(opt_in: bool, cfg: dict[str, str]) -> None:
        """A run that the client aborts at its first attempt, with the opt-in or without."""
        text = "Please route: long job"
        async with flow(
            agui_system, "stop", text=text, until="attempt 1", optIn=opt_in, **cfg
        ) as run:
            await run.line()

    try:
        await abort_run(True, opted)
        whole = await asyncio.wait_for(replayed(agui_system, opted["runId"]), 30)
        assert whole[-1]["outcome"] == {"type": "cancelled"}  # cancelled while the model worked
        await abort_run(False, plain)
        await asyncio.sleep(3)  # longer than the opted-in cancel took
        release.set()
        whole = await asyncio.wait_for(replayed(agui_system, plain["runId"]), 30)
    finally:
        release.set()
    assert whole[-1]["outcome"] == {"type": "success"}  # the run went on without its client
    texts = "".join(e["delta"] for e in whole if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert texts == "Finished anyway."
