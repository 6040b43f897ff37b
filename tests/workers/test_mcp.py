"""MCP tool servers end to end: the five services as processes on the real nats-server, a
scripted model behind the gateway's WebSocket, and real MCP servers written with the `mcp`
SDK (tests/support/mcp_server.py) — one the worker starts over stdio, one it reaches over
streamable HTTP on 127.0.0.1 — beside a server whose command does not exist."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from services.runtime.base.children import die_with_parent
from services.workers.tools.worker import SYSTEM
from tests.support.dirs import searchable_root
from tests.support.fakes.openai_server import FakeOpenAI, Reply, Script, tool_call
from tests.support.harness import ROOT, Client, System, free_port
from tests.support.mcp_server import stdio_entry
from tests.support.procs import alive
from tests.support.scripts import decide_tools, tool_results
from tests.support.systems import Systems
from tests.support.waits import wait_for

MODEL = "fake-tools-mcp"
CALL_TIMEOUT = 3
# Secrets the workers process holds; none may reach an MCP server.
PUSHOVER = "pushover-secret-" + uuid.uuid4().hex
# What the stdio server may see: its config's env, the SDK's basics, and what Python sets.
CONFIG_ENV = {"VAULT_MOTTO": "open sesame", "MCP_TEST_BANNER": "1"}
ALLOWED_ENV = {*CONFIG_ENV, "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LC_CTYPE"}


@pytest.fixture(scope="module")
def http_server() -> Iterator[int]:
    """The test server over streamable HTTP, on a free loopback port."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.mcp_server", "--http", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=die_with_parent,
    )
    deadline = time.monotonic() + 60
    while not _listening(port):
        assert proc.poll() is None, "the HTTP MCP server exited"
        assert time.monotonic() < deadline, "the HTTP MCP server did not listen"
        time.sleep(0.1)
    yield port
    proc.terminate()
    proc.wait(10)


files = searchable_root()


@pytest.fixture(scope="module")
def mcp_system(
    systems: Systems, files: Path, tmp_path_factory: pytest.TempPathFactory, http_server: int
) -> Iterator[System]:
    config = tmp_path_factory.mktemp("mcp") / "mcp.json"
    servers = {
        # autoApprove is another client's key: ignored, and said once.
        "vault": {
            **stdio_entry(**CONFIG_ENV),
            "autoApprove": ["reverse"],
        },
        "broken": {"command": "/nonexistent/mcp-server-binary", "args": ["--flag"]},
        "web": {"url": f"http://127.0.0.1:{http_server}/mcp", "headers": {"X-Test": "yes"}},
        "off": {"command": "/nonexistent/never-started", "disabled": True},
    }
    config.write_text(json.dumps({"mcpServers": servers}))
    yield from systems.run(
        tools=MODEL,
        keyless=True,
        SIDEKICK_FILES_ROOT=str(files),
        SIDEKICK_MCP_CONFIG=str(config),
        SIDEKICK_MCP_CALL_TIMEOUT=str(CALL_TIMEOUT),
        PUSHOVER_TOKEN=PUSHOVER,
        PUSHOVER_USER="pushover-user-key",
    )


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def call_then(name: str, args: dict[str, Any], answer: Callable[[str], str]) -> Script:
    """The worker model's script: call one tool, then answer from its result."""

    def model(body: dict[str, Any]) -> Reply:
        results = tool_results(body)
        if not results:
            return Reply(tool_calls=[tool_call(name, args)])
        return Reply(answer(results[0]["content"]))

    return model


def body(result: str) -> str:
    """A result's text after its first line (which names the server and says "untrusted")."""
    return result.split("\n", 1)[1]


def offered(fake_llm: FakeOpenAI) -> list[str]:
    """The function names the worker model was offered in its last call."""
    return [t["function"]["name"] for t in fake_llm.chat_calls(MODEL)[-1]["tools"]]


def mcp_lines(system: System) -> list[str]:
    return [line for line in system.log("workers").splitlines() if "MCP server" in line]


async def ask_tools(system: System, fake_llm: FakeOpenAI, model: Any, ask: str) -> Any:
    fake_llm.script("fake-orchestrator", decide_tools(ask))
    fake_llm.script(MODEL, model)
    async with Client(system.ws_url, events=True) as client:
        return await client.ask(f"Please route this: {ask}")


@pytest.mark.parametrize("server", ["vault", "web"], ids=["stdio", "streamable-http"])
async def test_the_model_calls_an_mcp_servers_tool_and_answers_with_its_result(
    mcp_system: System, fake_llm: FakeOpenAI, server: str
) -> None:
    word = uuid.uuid4().hex[:10]
    tool = f"{server}__reverse"
    model = call_then(tool, {"text": word}, lambda r: "The server answered: " + body(r))

    convo = await ask_tools(mcp_system, fake_llm, model, f"reverse my word with {server}")
    assert convo.end["status"] == "completed", convo.frames
    assert convo.text.startswith(f"The server answered: {word[::-1]} (reversed by pid ")
    (call, answer) = fake_llm.chat_calls(MODEL)
    # Offered with the server's schema, under the server's prefix, beside the built-in tools.
    tools = {t["function"]["name"]: t["function"] for t in call["tools"]}
    assert tools[tool]["parameters"]["properties"]["text"]["type"] == "string"
    assert tools[tool]["parameters"]["required"] == ["text"]
    assert (
        tools[tool]["description"]
        == f"[MCP server {server}] Reverse a text, character by character."
    )
    assert {"python_run", "files_read", "web__reverse", "vault__whoami"} <= set(tools)
    # Its output is a tool result marked as untrusted, never part of the system prompt.
    (result,) = tool_results(answer)
    assert result["content"].startswith(f"Result of the tool reverse of MCP server '{server}' (")
    assert "untrusted data" in result["content"].splitlines()[0]
    assert answer["messages"][0] == {"role": "system", "content": SYSTEM}


async def test_a_server_that_cannot_start_is_one_log_line_and_its_tools_are_absent(
    mcp_system: System, fake_llm: FakeOpenAI, http_server: int
) -> None:
    convo = await ask_tools(mcp_system, fake_llm, lambda _: Reply("Nothing to do."), "idle")
    assert convo.end["status"] == "completed"
    names = offered(fake_llm)
    assert not [n for n in names if n.startswith(("broken__", "off__"))], names
    assert "vault__reverse" in names and "web__reverse" in names
    lines = mcp_lines(mcp_system)
    broken = [line for line in lines if "'broken'" in line]
    assert len(broken) == 1, lines
    assert "did not start" in broken[0] and "No such file or directory" in broken[0]
    assert "--flag" not in broken[0], "arguments may carry keys: never logged"
    assert "WARNING" in broken[0]
    assert not [line for line in lines if "'off'" in line], "a disabled server is left alone"
    assert any("'vault' (stdio: python" in line and "connected: 4 tools" in line for line in lines)
    # An HTTP server is named by its URL without query or credentials.
    web = f"MCP server 'web' (http: http://127.0.0.1:{http_server}/mcp) connected: 4 tools"
    assert any(web in line for line in lines), lines
    ignored = [line for line in lines if "ignoring keys autoApprove" in line]
    assert len(ignored) == 1 and "'vault'" in ignored[0]
    # The vault's banner on stdout: one line naming the server, not the SDK's traceback.
    sdk = "MCP server 'vault' (stdio: python): the SDK says: Failed to parse JSONRPC message"
    assert any(sdk in line and "WARNING" in line for line in lines), lines
    # No traceback from the SDK or Sidekick's MCP code, and no ERROR line about MCP.
    log = mcp_system.log("workers")
    assert "site-packages/mcp/" not in log and "/tools/mcp_" not in log
    assert not [line for line in lines if " ERROR " in line]


async def test_a_tool_call_that_hangs_is_timed_out_with_a_clear_tool_error(
    mcp_system: System, fake_llm: FakeOpenAI
) -> None:
    model = call_then("vault__hang", {}, lambda r: "The tool said: " + r)

    convo = await ask_tools(mcp_system, fake_llm, model, "wait for the vault forever")
    assert convo.end["status"] == "completed", convo.frames
    assert convo.text == (
        f"The tool said: ERROR: the MCP tool hang of server 'vault' did not answer within "
        f"{CALL_TIMEOUT}s (SIDEKICK_MCP_CALL_TIMEOUT); the call was abandoned."
    )


async def test_the_stdio_servers_environment_holds_only_its_config_and_no_worker_secret(
    mcp_system: System, fake_llm: FakeOpenAI
) -> None:
    model = call_then("vault__whoami", {}, body)

    convo = await ask_tools(mcp_system, fake_llm, model, "who is the vault")
    pid = json.loads(convo.text)["pid"]
    # Read from the kernel, not from what the server says about itself.
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    environ = dict(item.split("=", 1) for item in raw.decode().split("\0") if item)
    assert environ["VAULT_MOTTO"] == "open sesame"
    assert set(environ) <= ALLOWED_ENV, set(environ) - ALLOWED_ENV
    workers_env = Path(f"/proc/{mcp_system.procs['workers'].pid}/environ").read_bytes()
    assert PUSHOVER.encode() in workers_env, "the worker holds the secret the server must not"
    for secret in (PUSHOVER, "test-key", mcp_system.service_urls.get("workers") or "nats://"):
        assert secret not in raw.decode()


async def test_a_server_that_exits_mid_call_is_restarted_with_one_log_line(
    mcp_system: System, fake_llm: FakeOpenAI
) -> None:
    model = call_then("vault__exit_now", {}, lambda r: "The tool said: " + r)

    before = len(mcp_lines(mcp_system))
    convo = await ask_tools(mcp_system, fake_llm, model, "make the vault leave")
    assert convo.end["status"] == "completed", convo.frames
    assert convo.text.startswith("The tool said: ERROR: the MCP server 'vault' went away during")
    request_id = convo.end["request_id"]

    def restarted() -> list[str]:
        # (The new process prints its banner again: that line is the SDK's, counted apart.)
        lines = mcp_lines(mcp_system)[before:]
        return [line for line in lines if "'vault'" in line and "the SDK says" not in line]

    await wait_for(restarted, timeout=60)
    (line,) = restarted()
    assert "WARNING" in line and "exited (it closed the connection during a call of " in line
    assert f"[req {request_id}]" in line, "the line carries the request whose call was cut"
    assert "last stderr line: exit_now: leaving without an answer" in line
    assert re.search(r"reconnected: 4 tools \(reverse, whoami, hang, exit_now\)", line), line

    # The new process answers the next request.
    again = call_then("vault__reverse", {"text": "abc"}, body)

    convo = await ask_tools(mcp_system, fake_llm, again, "reverse abc with the vault")
    assert convo.text.startswith("cba (reversed by pid "), convo.text


async def vault_pid(system: System, fake_llm: FakeOpenAI) -> int:
    model = call_then("vault__whoami", {}, body)

    convo = await ask_tools(system, fake_llm, model, "who is the vault now")
    pid = int(json.loads(convo.text)["pid"])
    assert alive(pid)
    return pid


async def test_the_stdio_server_ends_with_the_worker_killed_or_stopped(
    mcp_system: System, fake_llm: FakeOpenAI
) -> None:
    pid = await vault_pid(mcp_system, fake_llm)
    mcp_system.kill("workers")  # SIGKILL: no shutdown code runs in the worker
    await wait_for(lambda: not alive(pid), timeout=30)
    before = len(vault_connected(mcp_system))
    await asyncio.to_thread(mcp_system.restart, "workers")
    # The restarted worker started the server before it said it was ready.
    assert len(vault_connected(mcp_system)) == before + 1

    pid = await vault_pid(mcp_system, fake_llm)
    stopping = len(mcp_system.log("workers"))
    workers = mcp_system.procs["workers"]
    workers.terminate()  # SIGTERM: a clean stop
    await asyncio.to_thread(workers.wait, 30)
    assert not alive(pid)
    said = mcp_system.log("workers")[stopping:]
    # Quiet: nothing about MCP, and no traceback through the SDK or Sidekick's MCP code.
    assert "MCP" not in said and "site-packages/mcp/" not in said and "/tools/mcp_" not in said
    await asyncio.to_thread(mcp_system.restart, "workers")


def vault_connected(system: System) -> list[str]:
    return [line for line in mcp_lines(system) if "'vault'" in line and "connected: 4" in line]
