"""Egress: no URL chosen by a model, a page, a search result or a user reaches inside.

Every such URL is resolved here and refused when any address it resolves to is loopback,
private (RFC 1918, fc00::/7), link-local (169.254/16 with the cloud metadata address,
fe80::/10), shared (CGNAT, 100.64/10), unspecified, multicast, reserved or otherwise not
public. Addresses are judged after resolution, so every spelling of one (decimal `2130706433`,
hex `0x7f.1`, octal, short `127.1`, `0.0.0.0`, IPv4-mapped IPv6 `[::ffff:127.0.0.1]`, a name
that resolves to one) is the same address. The connection is then made to the address that was
checked (`connect`), never resolved a second time, so a DNS answer that changes in between
cannot slip through; every redirect is a new connection, checked again.

`SIDEKICK_EGRESS_ALLOW` (`host:port,host:port`) names operator-trusted endpoints that are not
checked (the tests' local fakes, an internal search mirror). The operator's own configured API
base URLs (Brave, Pushover, Wikipedia, the model) are trusted configuration and do not pass
through here; what the model or the web chooses does: browser traffic (services/workers/tools/
proxy.py) and the freshness validator's probes.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpcore
import httpx

from services.runtime.base.errors import SidekickError
from services.runtime.base.metrics import counter

log = logging.getLogger("sidekick.egress")

EGRESS_REFUSED = counter(
    "sidekick_egress_refused_total",
    "Outbound connections refused because their address is not public, by where they came from.",
    ["source"],
)

IP = ipaddress.IPv4Address | ipaddress.IPv6Address
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_METADATA = {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


class EgressRefused(SidekickError):
    """A destination that is not allowed; `reason` is what a user should read."""

    def __init__(self, target: str, reason: str) -> None:
        self.target = target
        self.reason = reason
        super().__init__(f"refused: {reason}")


def refusal(ip: IP) -> str | None:
    """What kind of address this is when it may not be reached ("a loopback address"), or
    None when it is a public address."""
    inner: IP = ip
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            inner = ip.ipv4_mapped
        elif ip in _NAT64:
            inner = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        elif ip.sixtofour is not None:
            inner = ip.sixtofour
        elif ip.teredo is not None:
            inner = ip.teredo[1]
        if inner is not ip:
            what = refusal(inner)
            return f"{inner} in disguise, {what}" if what else None
    if ip in _METADATA:
        return "a link-local address (cloud metadata)"
    for test, what in (
        (ip.is_loopback, "a loopback address"),
        (ip.is_unspecified, "an unspecified address"),
        (ip.is_link_local, "a link-local address"),
        (isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT, "a shared (CGNAT) address"),
        (ip.is_multicast, "a multicast address"),
        (ip.is_private, "a private address"),
        (ip.is_reserved, "a reserved address"),
        (not ip.is_global, "not a public address"),
    ):
        if test:
            return what
    return None


def parse_allow(text: str | None) -> frozenset[tuple[str, int]]:
    """`host:port,host:port` (IPv6 as `[::1]:8080`) into a set of (lowercase host, port)."""
    entries: set[tuple[str, int]] = set()
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit() or not host:
            raise ValueError(f"SIDEKICK_EGRESS_ALLOW: {item!r} is not host:port")
        entries.add((host.strip("[]").lower(), int(port)))
    return frozenset(entries)


@dataclass(frozen=True)
class Egress:
    """The check, with the operator's exemptions."""

    allow: frozenset[tuple[str, int]] = frozenset()

    @classmethod
    def from_setting(cls, text: str | None) -> Egress:
        return cls(parse_allow(text))

    def exempt(self, host: str, port: int) -> bool:
        return (host.strip("[]").lower(), port) in self.allow

    def target(self, url: str) -> tuple[str, int]:
        """(host, port) of an http(s) URL, or EgressRefused for any other kind of address."""
        try:
            parts = urlsplit(url.strip())
            port = parts.port
        except ValueError as exc:
            raise EgressRefused(url, f"{url[:200]!r} is not a valid address") from exc
        scheme = parts.scheme.lower()
        if scheme not in DEFAULT_PORTS:
            shown = f"{scheme}:" if scheme else "this kind of address"
            raise EgressRefused(url, f"only http:// and https:// may be opened, not {shown}")
        if not parts.hostname:
            raise EgressRefused(url, f"{url[:200]!r} has no host")
        return parts.hostname, port or DEFAULT_PORTS[scheme]

    async def resolve(self, host: str, port: int, *, source: str) -> list[str]:
        """The addresses to connect to for (host, port): all of them checked, or EgressRefused
        (counted and logged once) when any is not public."""
        infos = await _getaddrinfo(host, port)
        addresses = list(dict.fromkeys(str(info[4][0]).split("%")[0] for info in infos))
        if self.exempt(host, port):
            return addresses
        for address in addresses:
            what = refusal(ipaddress.ip_address(address))
            if what is not None:
                literal = address == host.strip("[]")
                why = f"{address} is {what}" if literal else f"{host} resolves to {address}, {what}"
                target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
                self.refused(target, why, source=source)
                raise EgressRefused(target, why)
        return addresses

    def refused(self, target: str, reason: str, *, source: str, request_id: str = "") -> None:
        EGRESS_REFUSED.labels(source).inc()
        log.warning(
            "egress refused %s (%s): %s%s",
            target,
            source,
            reason,
            f" request {request_id}" if request_id else "",
        )

    async def check_url(self, url: str, *, source: str) -> list[str]:
        host, port = self.target(url)
        return await self.resolve(host, port, source=source)

    async def connect(
        self, host: str, port: int, *, source: str, within: float = 10.0
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A TCP connection to (host, port), made to an address that was checked."""
        last: OSError | None = None
        for address in await self.resolve(host, port, source=source):
            try:
                async with asyncio.timeout(within):
                    return await asyncio.open_connection(address, port)
            except (OSError, TimeoutError) as exc:
                last = exc if isinstance(exc, OSError) else OSError(f"timed out: {address}")
        raise last or OSError(f"could not connect to {host}:{port}")

    def http_client(self, *, source: str, **kwargs: Any) -> httpx.AsyncClient:
        """An httpx client whose every connection (each redirect hop too) goes through the
        check and is made to the checked address; TLS still verifies the host name."""
        transport = httpx.AsyncHTTPTransport(retries=0)
        # httpx builds its connection pool without a way to pass a network backend; the pool is
        # swapped for one whose backend is this check (tests/walls/test_egress.py holds it to it).
        transport._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(),
            network_backend=_CheckedBackend(self, source),
        )
        return httpx.AsyncClient(transport=transport, **kwargs)


async def _getaddrinfo(host: str, port: int) -> list[Any]:
    loop = asyncio.get_running_loop()
    try:
        return await loop.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise OSError(f"{host} could not be resolved: {exc.strerror}") from exc


class _CheckedBackend(httpcore.AsyncNetworkBackend):
    def __init__(self, egress: Egress, source: str) -> None:
        self.egress = egress
        self.source = source
        self.inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        last: Exception | None = None
        for address in await self.egress.resolve(host, port, source=self.source):
            try:
                return await self.inner.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        raise last or httpcore.ConnectError(f"could not connect to {host}:{port}")

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise EgressRefused(path, "unix sockets may not be opened")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def registrable_domain(url_or_host: str) -> str:
    """The registrable domain (eTLD+1, from the Public Suffix List) of a URL or host name, so
    `a.example.co.uk` and `www.example.co.uk` count as one; an IP address is itself."""
    host = url_or_host
    if "://" in url_or_host:
        host = urlsplit(url_or_host).hostname or ""
    host = host.strip("[]").rstrip(".").lower()
    with contextlib.suppress(ValueError):
        return str(ipaddress.ip_address(host))
    return _psl().privatesuffix(host) or host


_PSL: Any = None


def _psl() -> Any:
    global _PSL
    if _PSL is None:
        from publicsuffixlist import PublicSuffixList

        _PSL = PublicSuffixList()
    return _PSL
