"""The plumbing under one MCP server's link: the transport's read stream watched for its end,
a stdio server's stderr kept as a short tail, and the SDK's own log lines kept to one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Any

import anyio

log = logging.getLogger("sidekick.workers.tools.mcp")

RECENT = 5.0  # seconds: stderr older than this when a server ends is not about its end


# Which server the current task works for: the SDK's tasks for a connection inherit it, so its
# log records can name the server.
SERVER: ContextVar[str] = ContextVar("mcp_server", default="MCP")


class _OneLine(logging.Handler):
    """The SDK's own log records, as one line each under Sidekick's MCP logger, naming the
    server: the SDK logs some server misbehaviour (a line on stdout that is not JSON-RPC) with
    a traceback."""

    def emit(self, record: logging.LogRecord) -> None:
        level = min(record.levelno, logging.WARNING)
        log.log(level, "%s: the SDK says: %s (%s)", SERVER.get(), record.getMessage(), record.name)


def quiet_sdk_logs() -> None:
    sdk = logging.getLogger("mcp")
    if not any(isinstance(h, _OneLine) for h in sdk.handlers):
        sdk.addHandler(_OneLine())
        sdk.propagate = False
        sdk.setLevel(min(logging.WARNING, log.getEffectiveLevel()))


class _WatchedRead:
    """The transport's read stream, telling the link when it ends (the server went away)."""

    def __init__(self, inner: Any, on_end: Callable[[], None]) -> None:
        self._inner = inner
        self._on_end = on_end

    def __getattr__(self, name: str) -> Any:  # e.g. `last_context`, read by the SDK if present
        return getattr(self._inner, name)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise

    def __aiter__(self) -> _WatchedRead:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _WatchedRead:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


@asynccontextmanager
async def watched(transport: Any, on_end: Callable[[], None]) -> AsyncIterator[Any]:
    async with transport as (read, write):
        yield _WatchedRead(read, on_end), write


class Stderr:
    """A stdio server's stderr: kept as a short tail for the log lines, shown at DEBUG only."""

    def __init__(self, server: str) -> None:
        self._server = server
        self.tail: deque[tuple[float, str]] = deque(maxlen=20)
        read_fd, write_fd = os.pipe()
        self.file = os.fdopen(write_fd, "w")  # handed to the child; closed here once it runs
        self._task = asyncio.create_task(self._read(read_fd))

    async def _read(self, fd: int) -> None:
        reader = asyncio.StreamReader(limit=1 << 20)
        loop = asyncio.get_running_loop()
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb")
        )
        try:
            pending = b""
            while chunk := await reader.read(65536):
                *lines, pending = (pending + chunk).split(b"\n")
                pending = pending[-4096:]
                for line in lines:
                    self._keep(line)
            self._keep(pending)
        finally:
            transport.close()

    def _keep(self, raw: bytes) -> None:
        line = raw.decode(errors="replace").strip()
        if line:
            self.tail.append((time.monotonic(), line[:300]))
            log.debug("MCP server %r stderr: %s", self._server, line)

    def close_ours(self) -> None:
        with contextlib.suppress(OSError):
            self.file.close()

    async def finish(self) -> str:
        """The last line it wrote just before it ended (a crash's last words), if any."""
        ended = time.monotonic()
        self.close_ours()
        with contextlib.suppress(TimeoutError, OSError):
            await asyncio.wait_for(asyncio.shield(self._task), 1.0)
        if not self._task.done():
            self._task.cancel()
        recent = [line for at, line in self.tail if at >= ended - RECENT]
        return recent[-1] if recent else ""
