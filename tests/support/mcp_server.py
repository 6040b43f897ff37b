"""A small real MCP server for the tests, built with the `mcp` SDK's server side.

    python -m tests.support.mcp_server                 over stdio (the worker starts it)
    python -m tests.support.mcp_server --http PORT     streamable HTTP on 127.0.0.1:PORT/mcp

Its tools: `reverse` (the text reversed, with a sentence only a real call can produce),
`whoami` (its pid and its environment, to check what the worker gave it), `hang` (never
answers) and `exit_now` (the process exits during the call, after a line on stderr). With
MCP_TEST_BANNER set it first prints a line that is not JSON-RPC on stdout, as careless servers do.
With MCP_TEST_TALLY set (a file's path) it has a fifth tool, `tally`, that appends its note to
that file: a test counts the calls that really reached the server.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ("reverse", "whoami", "hang", "exit_now")

app = MCPServer("sidekick-test-server")


def stdio_entry(**env: str) -> dict[str, Any]:
    """This server's entry in an `mcpServers` file, started over stdio."""
    return {
        "command": sys.executable,
        "args": ["-m", "tests.support.mcp_server"],
        "cwd": str(ROOT),
        "env": env,
    }


@app.tool()
def reverse(text: str) -> str:
    """Reverse a text, character by character."""
    return f"{text[::-1]} (reversed by pid {os.getpid()})"


@app.tool()
def whoami() -> dict[str, object]:
    """This server's process id and environment."""
    return {"pid": os.getpid(), "environ": dict(os.environ)}


@app.tool()
async def hang() -> str:
    """Never answers."""
    await asyncio.Event().wait()
    return "unreachable"


@app.tool()
def exit_now() -> str:
    """Ends this server's process in the middle of the call."""
    print("exit_now: leaving without an answer", file=sys.stderr, flush=True)
    os._exit(3)


def tally(note: str) -> str:
    """Count a note: appended to the tally file; returns how many notes it holds now."""
    path = Path(os.environ["MCP_TEST_TALLY"])
    with path.open("a", encoding="utf-8") as out:
        out.write(note.replace("\n", " ") + "\n")
    return f"tallied {note!r}: {len(path.read_text(encoding='utf-8').splitlines())} notes"


if os.environ.get("MCP_TEST_TALLY"):
    app.tool()(tally)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, help="serve streamable HTTP on this port")
    args = parser.parse_args()
    if args.http is None:
        if os.environ.get("MCP_TEST_BANNER"):  # a line on stdout that is not JSON-RPC
            print("Welcome! This server prints a banner first.", flush=True)
        app.run()
        return
    import uvicorn

    uvicorn.run(app.streamable_http_app(), host="127.0.0.1", port=args.http, log_level="warning")


if __name__ == "__main__":
    main()
