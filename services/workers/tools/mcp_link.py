"""One configured MCP server, kept connected with the official `mcp` SDK.

A link runs one supervising task: connect (start the process, or reach the URL), list the
tools, then wait until the connection is lost or the worker stops; then reconnect, backing off
while it keeps failing. The log gets one line per change a user would care about: the tools
offered, a server that did not start (its tools are left out), one that went away and was
reconnected (a stdio server is started again), or one that could not be (its tools are
dropped). Retries are quiet. A server's stderr never reaches the worker's log (DEBUG aside);
its last recent line is quoted in those lines.

A stdio server's environment is what the config gives it plus the SDK's short list of
non-secret basics (PATH, HOME, USER, LOGNAME, SHELL, TERM): none of the worker's keys.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT, CallToolResult, Implementation, Tool

from services.runtime.base.errors import SidekickError
from services.runtime.base.logs import request_context
from services.workers.tools.errors import ToolError, ToolUnavailable
from services.workers.tools.mcp_config import HttpServer, StdioServer
from services.workers.tools.mcp_transport import SERVER, Stderr, watched

log = logging.getLogger("sidekick.workers.tools.mcp")

CLIENT = Implementation(name="sidekick", version="0.1.0")
STABLE_AFTER = 60.0  # a connection that lived this long resets the back-off
MAX_BACKOFF = 300.0
MAX_PAGES = 20  # of tools/list: a server that pages forever cannot hang the start


@dataclass(frozen=True)
class Timeouts:
    connect: float  # start, handshake and the tool listing
    call: float  # one tool call


@dataclass
class _Loss:
    """Set once when a connection is lost, with the first reason seen."""

    event: asyncio.Event
    why: str = ""

    def __call__(self, why: str) -> None:
        if not self.event.is_set():
            self.why = why
            self.event.set()


@dataclass
class _Live:
    client: Client
    tools: list[Tool]
    loss: _Loss


class ServerLink:
    """A configured server: its tools while it is connected, and calls to them."""

    def __init__(self, name: str, config: StdioServer | HttpServer, timeouts: Timeouts) -> None:
        self.name = name
        self.config = config
        # A server's own `timeout` wins over SIDEKICK_MCP_CALL_TIMEOUT.
        self.timeouts = Timeouts(timeouts.connect, config.timeout or timeouts.call)
        self.why = "not started yet"  # why it is not connected, when it is not
        self._live: _Live | None = None
        self._settled = asyncio.Event()  # the first attempt ended, either way
        self._task: asyncio.Task[None] | None = None
        self._stderr: Stderr | None = None
        self._calls: dict[int, str] = {}  # calls in flight: request ids, for the log line
        self._cut_short: str | None = None  # a request whose call a lost connection cut short

    @property
    def gone(self) -> str:
        return "exited" if isinstance(self.config, StdioServer) else "went away"

    @property
    def label(self) -> str:
        return f"MCP server {self.name!r} ({self.config.shown()})"

    @property
    def tools(self) -> list[Tool]:
        return self._live.tools if self._live else []

    @property
    def connected(self) -> bool:
        return self._live is not None

    async def start(self) -> None:
        """Connect in the background; return when the first attempt has ended."""
        self._task = asyncio.create_task(self._supervise(), name=f"mcp-{self.name}")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._settled.wait(), self.timeouts.connect + 10)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def probe(self) -> list[Tool]:
        """Connect once, list the tools, disconnect (`sidekick doctor`); raises McpStartError."""
        SERVER.set(self.label)
        async with self._connection() as live:
            return live.tools

    async def call(self, tool: str, arguments: dict[str, Any], request_id: str) -> CallToolResult:
        live = self._live
        if live is None:
            raise ToolUnavailable(
                f"the MCP server {self.name!r} is not running ({self.why}); do without it."
            )
        seconds = self.timeouts.call
        token = object()
        self._calls[id(token)] = request_id
        try:
            async with asyncio.timeout(seconds + 2):
                return await live.client.call_tool(tool, arguments, read_timeout_seconds=seconds)
        except TimeoutError as exc:
            raise self._timed_out(tool) from exc
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                raise self._timed_out(tool) from exc
            if exc.code != CONNECTION_CLOSED:
                raise ToolError(f"the MCP server {self.name!r} refused the call: {exc}") from exc
            self._lose(live, self._ended())
        except (httpx2.HTTPError, OSError, anyio.BrokenResourceError) as exc:
            self._cut_short = self._cut_short or request_id
            self._lose(live, f"a call of request {request_id} failed: {self._describe(exc)}")
        finally:
            del self._calls[id(token)]
        raise ToolUnavailable(
            f"the MCP server {self.name!r} went away during the call, so whether {tool} did "
            "anything is unknown; Sidekick is reconnecting to it."
        )

    def _timed_out(self, tool: str) -> ToolUnavailable:
        setting = "its `timeout`" if self.config.timeout else "SIDEKICK_MCP_CALL_TIMEOUT"
        return ToolUnavailable(
            f"the MCP tool {tool} of server {self.name!r} did not answer within "
            f"{self.timeouts.call:g}s ({setting}); the call was abandoned."
        )

    def _describe(self, exc: BaseException) -> str:
        """One line for a failure to connect or call, whatever the SDK or the transport raised."""
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
        if isinstance(exc, TimeoutError):
            return f"no answer within {self.timeouts.connect:g}s (SIDEKICK_MCP_CONNECT_TIMEOUT)"
        if isinstance(exc, MCPError):
            if exc.code == CONNECTION_CLOSED:
                return "it closed the connection (the process exited, or the server hung up)"
            return f"it answered with an error: {exc}"
        if isinstance(exc, httpx2.HTTPStatusError):
            return f"HTTP {exc.response.status_code} from the server"
        if isinstance(exc, httpx2.HTTPError | OSError) and isinstance(self.config, HttpServer):
            return f"cannot reach it: {type(exc).__name__}: {exc}"[:300]
        if isinstance(exc, OSError):
            return f"cannot run it: {exc}"[:300]
        return f"{type(exc).__name__}: {exc}"[:300]

    def _lose(self, live: _Live, why: str) -> None:
        if self._live is live:
            self._live = None
            self.why = "it went away; reconnecting"
        live.loss(why)

    def _ended(self) -> str:
        """Why a connection ended by itself, naming the requests whose calls it cut short."""
        during = sorted(set(self._calls.values()))
        self._cut_short = self._cut_short or (during[0] if during else None)
        where = f" during a call of request {', '.join(during)}" if during else ""
        return f"it closed the connection{where}"

    async def _supervise(self) -> None:
        SERVER.set(self.label)
        failures = 0
        said_down = False
        lost_why = ""  # a connection just ended: said in the next line, with its outcome
        while True:
            started = time.monotonic()
            try:
                async with self._connection() as live:
                    self._up(live, lost_why)
                    lost_why, said_down = "", False
                    await live.loss.event.wait()
                    lost_why = live.loss.why
                    self._live = None
                    self.why = "it went away; reconnecting"
            except McpStartError as exc:
                self._down(str(exc), lost_why, said_down)
                lost_why, said_down = "", True
            except Exception as exc:  # closing a lost connection failed: it is gone either way
                lost_why = lost_why or self._describe(exc)
            finally:
                self._live = None
            if lost_why:
                lost_why += await self._last_words()
                self.why = f"it {self.gone}: {lost_why}"
            lived = time.monotonic() - started
            failures = 0 if lost_why and lived >= STABLE_AFTER else failures + 1
            # A lost connection is retried at once, unless it keeps being lost; failures to
            # start back off (2, 4, 8, ... seconds, at most MAX_BACKOFF).
            quick = lost_why and failures <= 1
            await asyncio.sleep(0 if quick else min(MAX_BACKOFF, 2.0**failures))

    def _up(self, live: _Live, lost_why: str) -> None:
        self._live = live
        names = ", ".join(t.name for t in live.tools) or "none"
        tools = f"{len(live.tools)} tools ({names})"
        if lost_why:
            with self._for_request():
                log.warning("%s %s (%s); reconnected: %s", self.label, self.gone, lost_why, tools)
        else:
            log.info("%s connected: %s", self.label, tools)
        self._settled.set()

    def _down(self, why: str, lost_why: str, said_down: bool) -> None:
        self.why = why
        if lost_why:
            with self._for_request():
                log.warning(
                    "%s %s (%s) and could not be reconnected: %s. Its tools are dropped; "
                    "retrying in the background.",
                    self.label,
                    self.gone,
                    lost_why,
                    why,
                )
        elif not said_down:
            log.warning(
                "%s did not start: %s. Its tools are left out; retrying in the background.",
                self.label,
                why,
            )
        self._settled.set()

    @contextlib.contextmanager
    def _for_request(self) -> Iterator[None]:
        """The line about a lost connection carries the request whose call it cut short."""
        with request_context(self._cut_short):
            yield
        self._cut_short = None

    async def _last_words(self) -> str:
        said = await self._stderr.finish() if self._stderr else ""
        return f"; its last stderr line: {said}" if said else ""

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[_Live]:
        """Connected and listed, or McpStartError; the server is closed on exit."""
        loss = _Loss(asyncio.Event())
        async with AsyncExitStack() as stack:
            try:
                async with asyncio.timeout(self.timeouts.connect):
                    transport = await self._transport(stack, lambda: loss(self._ended()))
                    client = Client(transport, client_info=CLIENT, read_timeout_seconds=None)
                    await stack.enter_async_context(client)
                    if self._stderr:
                        self._stderr.close_ours()  # the child has its copy now
                    tools = await _list_tools(client)
            except Exception as exc:
                why = self._describe(exc)
                await stack.aclose()
                raise McpStartError(why + await self._last_words()) from None
            yield _Live(client, tools, loss)

    async def _transport(self, stack: AsyncExitStack, on_end: Callable[[], None]) -> Any:
        config = self.config
        if isinstance(config, StdioServer):
            self._stderr = Stderr(self.name)
            stack.callback(self._stderr.close_ours)
            params = StdioServerParameters(
                command=config.command, args=config.args, env=config.env, cwd=config.cwd
            )
            return watched(stdio_client(params, errlog=self._stderr.file), on_end)
        http = httpx2.AsyncClient(headers=config.headers, timeout=httpx2.Timeout(30.0, read=300.0))
        await stack.enter_async_context(http)
        return watched(streamable_http_client(config.url, http_client=http), on_end)


class McpStartError(SidekickError):
    """A server could not be connected; the message says why (one line)."""


async def _list_tools(client: Client) -> list[Tool]:
    tools: list[Tool] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools
