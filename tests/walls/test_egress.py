"""The egress check on its own: which addresses are inside, in every spelling, and an HTTP client
whose every connection (each redirect hop too) is checked and made to the checked address."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

import httpx
import pytest

from services.runtime.walls.egress import (
    Egress,
    EgressRefused,
    parse_allow,
    refusal,
    registrable_domain,
)
from tests.support.fakes.http import FakeServer, Response


@pytest.mark.parametrize(
    ("address", "what"),
    [
        ("127.0.0.1", "a loopback address"),
        ("127.8.9.10", "a loopback address"),
        ("::1", "a loopback address"),
        ("0.0.0.0", "an unspecified address"),
        ("::", "an unspecified address"),
        ("10.0.0.1", "a private address"),
        ("172.16.5.4", "a private address"),
        ("192.168.1.1", "a private address"),
        ("fd12::1", "a private address"),
        ("169.254.169.254", "a link-local address (cloud metadata)"),
        ("169.254.1.1", "a link-local address"),
        ("fe80::1", "a link-local address"),
        ("100.64.0.1", "a shared (CGNAT) address"),
        ("224.0.0.1", "a multicast address"),
        ("240.0.0.1", "a private address"),
        ("::ffff:127.0.0.1", "127.0.0.1 in disguise, a loopback address"),
        (
            "64:ff9b::a9fe:a9fe",
            "169.254.169.254 in disguise, a link-local address (cloud metadata)",
        ),
        ("2002:7f00:1::", "127.0.0.1 in disguise, a loopback address"),
    ],
)
def test_inside_addresses_are_refused_with_what_they_are(address: str, what: str) -> None:
    assert refusal(ipaddress.ip_address(address)) == what


@pytest.mark.parametrize("address", ["93.184.216.34", "2606:2800:220:1::1", "::ffff:8.8.8.8"])
def test_public_addresses_pass(address: str) -> None:
    assert refusal(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://localhost/",
        "http://2130706433/",
        "http://0x7f000001/",
        "http://0x7f.1/",
        "http://0177.0.0.1/",
        "http://127.1/",
        "http://0/",
        "http://[::ffff:7f00:1]/",
    ],
)
async def test_every_spelling_of_loopback_resolves_to_a_refusal(url: str) -> None:
    with pytest.raises(EgressRefused, match=r"loopback|unspecified"):
        await Egress().check_url(url, source="test")


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "chrome://settings", "data:text/html,x", "javascript:1"]
)
async def test_other_schemes_are_refused(url: str) -> None:
    with pytest.raises(EgressRefused, match="only http:// and https:// may be opened"):
        await Egress().check_url(url, source="test")


def test_the_allow_list_is_host_and_port() -> None:
    assert parse_allow("127.0.0.1:8080, [::1]:9000,Example.com:443") == {
        ("127.0.0.1", 8080),
        ("::1", 9000),
        ("example.com", 443),
    }
    with pytest.raises(ValueError, match="not host:port"):
        parse_allow("127.0.0.1")


def test_registrable_domains_count_one_site_once() -> None:
    assert registrable_domain("https://news.example.co.uk/a") == "example.co.uk"
    assert registrable_domain("https://www.example.co.uk/b") == "example.co.uk"
    assert registrable_domain("http://[::1]:8080/") == "::1"
    assert registrable_domain("EXAMPLE.com.") == "example.com"


@pytest.fixture
def servers() -> Iterator[tuple[FakeServer, FakeServer]]:
    inside, trusted = FakeServer().start(), FakeServer().start()
    inside.fallback = lambda rec: Response(200, {"secret": True})
    trusted.route("GET", "/ok", lambda rec: Response(200, {"ok": True}))
    trusted.route("GET", "/bounce", lambda rec: Response(302, b"", {"Location": inside.url + "/"}))
    yield inside, trusted
    inside.stop()
    trusted.stop()


async def test_the_checked_client_refuses_inside_and_every_redirect_hop_into_it(
    servers: tuple[FakeServer, FakeServer],
) -> None:
    inside, trusted = servers
    egress = Egress.from_setting(trusted.host_port)
    async with egress.http_client(source="test", follow_redirects=True) as http:
        assert (await http.get(trusted.url + "/ok")).json() == {"ok": True}
        with pytest.raises(EgressRefused, match=r"127\.0\.0\.1 is a loopback address"):
            await http.get(inside.url + "/")
        with pytest.raises(EgressRefused, match="loopback"):
            await http.get(trusted.url + "/bounce")
        with pytest.raises(EgressRefused, match="localhost resolves to"):
            await http.get(inside.url.replace("127.0.0.1", "localhost") + "/")
    assert inside.requests == []


async def test_an_unchecked_client_would_have_reached_it(
    servers: tuple[FakeServer, FakeServer],
) -> None:
    """The control for the test above: the same requests without the check get through."""
    inside, trusted = servers
    async with httpx.AsyncClient(follow_redirects=True) as http:
        await http.get(trusted.url + "/bounce")
    assert len(inside.requests) == 1
