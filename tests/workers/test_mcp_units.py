"""The MCP parts in process: the servers' file (its mistakes are one clear message naming the
server), the names tools get (every one fits OpenAI's rules and stays unique) and how results
read (`fast`, no processes); then, against the real test server started over stdio, the bound on
how many tools are offered, a server that never answers, and per-server call time limits."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
from pathlib import Path

import mcp_types as mcp
import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.workers.tools.mcp_config import HttpServer, McpConfigError, StdioServer, load
from services.workers.tools.mcp_link import Timeouts
from services.workers.tools.mcp_tools import McpTools, render, tool_name
from services.workers.tools.toolbox import Call, RunContext, ToolBox
from tests.support.mcp_server import TOOLS, stdio_entry
from tests.support.procs import running

OPENAI_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


@pytest.mark.fast
def test_a_claude_desktop_style_file_is_read_with_both_transports(tmp_path: Path) -> None:
    config = load(
        write(
            tmp_path,
            {
                "mcpServers": {
                    "files": {"command": "npx", "args": ["-y", "x"], "env": {"K": "v"}},
                    "remote": {"type": "http", "url": "https://h.example/mcp", "headers": {}},
                    "later": {"command": "uvx", "disabled": True, "alwaysAllow": []},
                }
            },
        )
    )
    files, remote = config.enabled["files"], config.enabled["remote"]
    assert isinstance(files, StdioServer) and files.args == ["-y", "x"] and files.env == {"K": "v"}
    assert isinstance(remote, HttpServer) and remote.url == "https://h.example/mcp"
    assert list(config.enabled) == ["files", "remote"]
    assert config.servers["later"].ignored_keys == ["alwaysAllow"]


@pytest.mark.fast
@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not valid JSON (line 1, column 2"),
        ({"servers": {}}, 'has no "mcpServers" object'),
        ({"mcpServers": {"a": {"url": "http://h/sse", "type": "sse"}}}, "'a': the SSE transport"),
        ({"mcpServers": {"a": {"command": "x", "url": "http://h"}}}, "'a': give either"),
        ({"mcpServers": {"a": {"args": ["x"]}}}, "'a': give `command` (a stdio server)"),
        ({"mcpServers": {"a": "npx x"}}, "'a': each server must be a JSON object"),
        ({"mcpServers": {"a": {"command": "x", "args": "y"}}}, "mcpServers.a.args: Input"),
        ({"mcpServers": {"a": {"url": "ftp://h/mcp"}}}, "mcpServers.a.url: String should match"),
        ({"mcpServers": {"a": {"command": "x", "timeout": 999}}}, "mcpServers.a.timeout"),
    ],
)
def test_a_file_that_cannot_be_used_is_one_message_saying_where_and_why(
    tmp_path: Path, content: object, message: str
) -> None:
    with pytest.raises(McpConfigError) as caught:
        load(write(tmp_path, content))
    assert message in str(caught.value)
    assert str(tmp_path) in str(caught.value)


@pytest.mark.fast
def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(McpConfigError, match=r"cannot read .*nope\.json: No such file"):
        load(tmp_path / "nope.json")


@pytest.mark.fast
def test_a_server_is_shown_without_what_may_carry_keys() -> None:
    stdio = StdioServer(command="/opt/bin/server", args=["--token", "sk-1"], env={"K": "sk-2"})
    assert stdio.shown() == "stdio: server"
    http = HttpServer(url="https://user:pw@h.example:8443/mcp?key=sk-3")
    assert http.shown() == "http: https://h.example:8443/mcp"


@pytest.mark.fast
def test_plain_names_are_prefixed_and_others_get_a_stable_hash() -> None:
    assert tool_name("github", "create_issue") == "github__create_issue"
    assert tool_name("brave-search", "web-search") == "brave-search__web-search"
    dotted = tool_name("my server", "files.read")
    assert OPENAI_NAME.match(dotted) and dotted.startswith("my_server__files_read_")
    assert dotted == tool_name("my server", "files.read")
    # Split one way only: the same joined text from two different pairs stays two names.
    assert tool_name("a__b", "c") != tool_name("a", "b__c")
    assert tool_name("a_", "_b") != tool_name("a", "__b")
    long = tool_name("s" * 40, "t" * 40)
    assert len(long) == 64 and long != tool_name("s" * 40, "t" * 39 + "u")


@pytest.mark.fast
@given(st.text(min_size=1, max_size=80), st.text(min_size=1, max_size=80))
def test_every_name_fits_openais_function_name_rules(server: str, tool: str) -> None:
    assert OPENAI_NAME.match(tool_name(server, tool))


@pytest.mark.fast
def test_a_result_is_its_text_with_what_is_not_text_named_not_passed_on() -> None:
    result = mcp.CallToolResult(
        content=[
            mcp.TextContent(text="first"),
            mcp.ImageContent(data="aGk=", mime_type="image/png"),
            mcp.ResourceLink(name="report", uri="file:///r.txt"),
            mcp.EmbeddedResource(resource=mcp.TextResourceContents(uri="mem://a", text="inline")),
            mcp.EmbeddedResource(
                resource=mcp.BlobResourceContents(uri="mem://b", blob="aGk=", mime_type="x/y")
            ),
        ]
    )
    assert render(result).splitlines() == [
        "first",
        "[image (image/png) not shown]",
        "[resource report: file:///r.txt]",
        "[resource mem://a]",
        "inline",
        "[binary resource mem://b (x/y) not shown]",
    ]
    assert render(mcp.CallToolResult(content=[], structured_content={"n": 1})) == '{"n": 1}'
    assert render(mcp.CallToolResult(content=[])) == "(no content)"


@pytest.mark.fast
def test_a_file_that_cannot_be_used_turns_mcp_off_with_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "sidekick.workers.tools.mcp")
    hub = McpTools.from_file(write(tmp_path, "[]"), Timeouts(5, 5), limit=10)
    assert hub.links == [] and hub.tools() == []
    (record,) = caplog.records
    assert record.levelname == "WARNING"
    assert record.getMessage().startswith("MCP servers are off: ")
    assert record.getMessage().endswith('has no "mcpServers" object (SIDEKICK_MCP_CONFIG).')


async def test_tools_beyond_the_limit_are_left_out_with_one_line_per_listing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "sidekick.workers.tools.mcp")
    path = write(tmp_path, {"mcpServers": {"vault": stdio_entry()}})
    hub = McpTools.from_file(path, Timeouts(connect=60, call=5), limit=2)
    await hub.start()
    try:
        first = hub.tools()
        assert [t.name for t in first] == [f"vault__{n}" for n in TOOLS[:2]]
        definition = first[0].definition()["function"]
        assert definition["description"].startswith("[MCP server vault] Reverse a text")
        assert definition["parameters"]["type"] == "object"
        assert [t.name for t in hub.tools()] == [t.name for t in first]
    finally:
        await hub.stop()
    left_out = [r.getMessage() for r in caplog.records if "not offered" in r.getMessage()]
    assert left_out == [
        "MCP server 'vault' (stdio: python): not offered to the model: "
        "hang (too many tools), exit_now (too many tools)"
    ]


async def test_a_server_that_never_answers_is_cut_off_at_the_connect_timeout_quietly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "sidekick.workers.tools.mcp")
    # A banner on stdout (not JSON-RPC), then silence: the SDK would log that with a traceback.
    code = "import time; print('Welcome to my server!', flush=True); time.sleep(120)"
    mute = {"command": sys.executable, "args": ["-c", code]}
    hub = McpTools.from_file(
        write(tmp_path, {"mcpServers": {"mute": mute}}), Timeouts(connect=3, call=5), limit=10
    )
    await hub.start()
    await hub.stop()
    assert hub.tools() == []
    # (pytest also hangs its own handler on the SDK's logger; Sidekick's lines are what count.)
    ours = [r for r in caplog.records if r.name.startswith("sidekick")]
    said = [(r.levelname, r.getMessage()) for r in ours]
    assert (
        "WARNING",
        "MCP server 'mute' (stdio: python) did not start: no answer within 3s "
        "(SIDEKICK_MCP_CONNECT_TIMEOUT). Its tools are left out; retrying in the background.",
    ) in said, said
    assert all(level == "WARNING" for level, _ in said), said
    assert not [r for r in ours if r.exc_info], "one line each, no traceback"
    sdk = "MCP server 'mute' (stdio: python): the SDK says: Failed to parse JSONRPC message"
    assert any(message.startswith(sdk) for _, message in said), said
    assert running("Welcome to my server") == [], "it was stopped"


async def test_a_servers_own_timeout_wins_and_the_model_is_told_which_limit_cut_the_call(
    tmp_path: Path,
) -> None:
    servers = {"quick": {**stdio_entry(), "timeout": 1}, "slow": stdio_entry()}
    hub = McpTools.from_file(
        write(tmp_path, {"mcpServers": servers}), Timeouts(connect=60, call=2), limit=20
    )
    await hub.start()
    try:
        box = ToolBox(hub.tools(), result_chars=2000, call_timeout=30)
        run = RunContext("req-timeout", "session", 1)
        quick, slow = await asyncio.gather(
            box.call("quick__hang", "{}", Call(run, "c1")),
            box.call("slow__hang", "{}", Call(run, "c2")),
        )
        assert quick.content == (
            "ERROR: the MCP tool hang of server 'quick' did not answer within 1s (its "
            "`timeout`); the call was abandoned."
        )
        assert slow.content.endswith(
            "within 2s (SIDEKICK_MCP_CALL_TIMEOUT); the call was abandoned."
        )
        # The server is still there for the next call.
        after = await box.call("quick__reverse", '{"text": "ok"}', Call(run, "c3"))
        assert after.ok and "\nko (reversed by pid " in after.content
    finally:
        await hub.stop()
