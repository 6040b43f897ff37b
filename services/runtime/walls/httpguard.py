"""The HTTP server's own guard against slow and many clients (every service's server, the
gateway's above all): a cap on open connections, in total and per client address; a deadline for
a request's head (request line and headers), so a client trickling a header line now and then
(slowloris) or sending nothing at all is closed; a cap on a request head's size (431, and the
connection closed before more of it is read); and refusals logged as one summary line per
interval, not one line each (an attack must not fill the disk).

uvicorn has a keep-alive timeout but no head timeout, so this is its HTTP protocol (httptools)
with the guard added: the deadline starts when the connection opens and whenever a new request
begins, and ends when the request's head is complete. Once a socket is upgraded to a WebSocket,
the WebSocket's own limits apply (ping timeout, and the gateway's first-frame and idle timeouts).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger("sidekick.http")

SUMMARY_EVERY = 10.0


@dataclass
class Guard:
    max_connections: int
    max_per_client: int
    head_timeout: float
    max_head_bytes: int = 32 * 1024
    exempt: frozenset[str] = frozenset({"127.0.0.1", "::1"})
    open: dict[asyncio.BaseTransport, str] = field(default_factory=dict)
    refusals: Counter[str] = field(default_factory=Counter)
    _summary_at: float = field(default_factory=time.monotonic)
    _swept_at: float = 0.0

    def admit(self, transport: asyncio.BaseTransport, client: str) -> str | None:
        """None, and the connection is counted; or why it is refused."""
        self._sweep(force=len(self.open) >= self.max_connections)
        if len(self.open) >= self.max_connections:
            return "too many connections"
        if self.max_per_client and client not in self.exempt:
            held = sum(1 for c in self.open.values() if c == client)
            if held >= self.max_per_client:
                self._sweep(force=True)
                held = sum(1 for c in self.open.values() if c == client)
                if held >= self.max_per_client:
                    return "too many connections from one address"
        self.open[transport] = client
        return None

    def release(self, transport: asyncio.BaseTransport) -> None:
        self.open.pop(transport, None)

    def _sweep(self, *, force: bool = False) -> None:
        """Forget connections that closed without telling us (upgraded WebSockets)."""
        now = time.monotonic()
        if not force and now - self._swept_at < 1.0:
            return
        self._swept_at = now
        for transport in [t for t in self.open if t.is_closing()]:
            del self.open[transport]

    def refused(self, why: str) -> None:
        """Count a refusal; the first of an interval schedules that interval's summary line."""
        if not self.refusals:
            asyncio.get_running_loop().call_later(SUMMARY_EVERY, self.flush)
            self._summary_at = time.monotonic()
        self.refusals[why] += 1

    def flush(self) -> None:
        now = time.monotonic()
        if self.refusals:
            parts = ", ".join(f"{n} {why}" for why, n in self.refusals.most_common())
            log.warning(
                "refused or closed %d connection(s) in the last %.0f s: %s (%d open)",
                sum(self.refusals.values()),
                now - self._summary_at,
                parts,
                len(self.open),
            )
            self.refusals.clear()


def client_address(transport: asyncio.BaseTransport) -> str:
    peer = transport.get_extra_info("peername")
    host = str(peer[0]) if isinstance(peer, tuple) and peer else "unknown"
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def guarded_http(guard: Guard) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol with `guard` applied (pass as `uvicorn.Config(http=...)`)."""

    class GuardedHttp(HttpToolsProtocol):
        _deadline: asyncio.TimerHandle | None = None
        _counted = False
        _in_head = True  # between a request's start and the end of its headers
        _head = 0  # bytes of the head seen so far
        _tail = b""  # the last bytes seen, to find the head's end across two chunks

        def data_received(self, data: bytes) -> None:
            # Counted before the parser sees it: httptools keeps a header line whole until it
            # ends, so a 96 MiB line would be 96 MiB held (and a heap that does not shrink).
            if self._in_head and not self.transport.is_closing():
                end = (self._tail + data).find(b"\r\n\r\n")
                seen = len(data) if end < 0 else max(0, end + 4 - len(self._tail))
                if self._head + seen > guard.max_head_bytes:
                    self._head_too_large()
                    return
                self._head += seen
                self._tail = (self._tail + data)[-3:]
            super().data_received(data)

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._in_head, self._head, self._tail = True, 0, b""

        def _head_too_large(self) -> None:
            """431 and close: nothing more of this connection is read."""
            self._disarm()
            guard.refused("request head too large")
            body = f"Request head (line and headers) over {guard.max_head_bytes} bytes.".encode()
            self.transport.write(
                b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
                b"content-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
                b"content-length: %d\r\n\r\n%s" % (len(body), body)
            )
            self.transport.close()

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            why = guard.admit(transport, client_address(transport))
            if why is not None:
                guard.refused(why)
                transport.abort()
                return
            self._counted = True
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            if self._counted:
                guard.release(self.transport)
            super().connection_lost(exc)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._arm()

        def on_headers_complete(self) -> None:
            self._disarm()
            self._in_head = False
            super().on_headers_complete()

        def _arm(self) -> None:
            if self._deadline is None:
                loop = asyncio.get_running_loop()
                self._deadline = loop.call_later(guard.head_timeout, self._expired)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expired(self) -> None:
            self._deadline = None
            guard.refused("request head not complete in time")
            self.transport.abort()

    return GuardedHttp


def uvicorn_options(guard: Guard) -> dict[str, Any]:
    return {"http": guarded_http(guard), "timeout_keep_alive": 5}
