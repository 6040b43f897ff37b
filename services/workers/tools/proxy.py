"""The one way out for the browser: a forward proxy on 127.0.0.1 that every request Chromium
makes must go through (its contexts are created with this proxy, loopback included), which
resolves each destination, refuses what the egress check refuses, and connects to the address
it checked.

It speaks the two forms a browser uses with an HTTP proxy: `CONNECT host:port` (https, wss) and
absolute-form requests (`GET http://host/path`, plain http and ws). Navigations, redirects,
subresources, fetch/XHR, WebSockets and workers all arrive here. A refusal answers 403 with the
reason as its text, is logged and counted once, and is kept for the tool to report.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from urllib.parse import urlsplit

from services.runtime.walls.egress import DEFAULT_PORTS, Egress, EgressRefused

log = logging.getLogger("sidekick.workers.tools.proxy")

MAX_HEAD = 64 * 1024
HEAD_TIMEOUT = 30.0
PROXY_HEADER = "X-Sidekick-Proxy"
HOP_BY_HOP = {b"proxy-connection", b"proxy-authorization", b"keep-alive", b"connection"}


class FilteringProxy:
    """One browser context's proxy. `refusals` lists what it refused, newest last."""

    def __init__(self, egress: Egress, request_id: str = "") -> None:
        self.egress = egress
        self.request_id = request_id
        self.refusals: list[str] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await self._handle(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass
        except asyncio.CancelledError:
            # close() ends a connection still open (one the browser opened ahead, idle): the
            # connection's own task ends quietly, since asyncio's stream callback (3.11) would
            # log a cancelled task as an unhandled error.
            pass
        finally:
            if task is not None:
                self._tasks.discard(task)
            with contextlib.suppress(OSError):
                writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async with asyncio.timeout(HEAD_TIMEOUT):
            head = await reader.readuntil(b"\r\n\r\n")
        if len(head) > MAX_HEAD:
            return
        request_line, _, rest = head.partition(b"\r\n")
        try:
            method, target, version = request_line.decode("latin-1").split(" ")
        except ValueError:
            await _answer(writer, 400, "Bad request line")
            return
        try:
            if method.upper() == "CONNECT":
                host, port = _authority(target)
                upstream = await self._open(host, port, target)
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                await writer.drain()
            else:
                parts = urlsplit(target)
                if parts.scheme.lower() not in ("http", "ws") or not parts.hostname:
                    raise EgressRefused(target, f"{target[:100]!r} is not an http:// address")
                host, port = parts.hostname, parts.port or DEFAULT_PORTS[parts.scheme.lower()]
                upstream = await self._open(host, port, target)
                path = parts.path or "/"
                if parts.query:
                    path += "?" + parts.query
                up_writer = upstream[1]
                up_writer.write(f"{method} {path} {version}\r\n".encode("latin-1"))
                up_writer.write(_forwarded_headers(rest))
                await up_writer.drain()
        except EgressRefused as exc:
            self.refusals.append(f"{exc.target}: {exc.reason}")
            await _answer(writer, 403, f"refused: {exc.reason}", "refused")
            return
        except OSError as exc:
            await _answer(writer, 502, f"could not connect: {exc}", "unreachable")
            return
        await _pipe_both(reader, writer, *upstream)

    async def _open(
        self, host: str, port: int, target: str
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await self.egress.connect(host, port, source="browser")


def _authority(target: str) -> tuple[str, int]:
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit():
        raise EgressRefused(target, f"{target[:100]!r} is not host:port")
    return host.strip("[]"), int(port)


def _forwarded_headers(rest: bytes) -> bytes:
    """The request's headers without the proxy's own hop-by-hop ones; the connection closes
    after one exchange unless it upgrades (a WebSocket), so no later request on it can reach a
    destination that was not checked for it."""
    lines = [line for line in rest.split(b"\r\n") if line]
    upgrade = any(line.lower().startswith(b"upgrade:") for line in lines)
    kept = [line for line in lines if line.split(b":", 1)[0].strip().lower() not in HOP_BY_HOP]
    kept.append(b"Connection: upgrade" if upgrade else b"Connection: close")
    return b"\r\n".join(kept) + b"\r\n\r\n"


async def _answer(
    writer: asyncio.StreamWriter, status: int, text: str, why: str = "bad-request"
) -> None:
    """The proxy's own answer; `X-Sidekick-Proxy` tells the browser tool it was not the site."""
    body = text.encode("utf-8")
    reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"{PROXY_HEADER}: {why}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    writer.write(head.encode("latin-1") + body)
    with contextlib.suppress(OSError):
        await writer.drain()


async def _pipe_both(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    up_reader: asyncio.StreamReader,
    up_writer: asyncio.StreamWriter,
) -> None:
    async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while chunk := await src.read(65536):
                dst.write(chunk)
                await dst.drain()
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.close()

    try:
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
    finally:
        with contextlib.suppress(OSError):
            up_writer.close()
