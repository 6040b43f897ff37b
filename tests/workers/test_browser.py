"""browser_*: real headless Chromium (Debian's, through Playwright) against a local site. A
missing Chromium fails these tests; it never skips them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from services.runtime.walls.egress import Egress
from services.workers.tools.browser import Browser
from services.workers.tools.settings import ToolsSettings
from tests.support.browsing import task
from tests.support.fakes.http import FakeServer, Response
from tests.support.fakes.site import FakeSite

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"

INDEX = """<!doctype html><html><head><title>Preserves</title></head><body>
<h1>Preserves</h1>
<p id="fact">loading</p>
<a href="/orange">Orange marmalade</a> <a href="https://example.org/elsewhere">Elsewhere</a>
<button onclick="document.getElementById('fact').textContent='Button pressed'">Press</button>
<script>document.getElementById('fact').textContent = 'Made by ' + ['Java', 'Script'].join('');
</script></body></html>"""

ORANGE = """<!doctype html><html><head><title>Orange</title></head><body>
<p>Seville oranges are bitter.</p></body></html>"""


@pytest.fixture(scope="module")
def site() -> Iterator[FakeSite]:
    with FakeSite() as fake:
        fake.page("/", INDEX)
        fake.page("/orange", ORANGE)
        yield fake


@pytest.fixture(scope="module")
async def browser(site: FakeSite) -> AsyncIterator[Browser]:
    # The local site (and a closed port) are operator-trusted here; nothing else on loopback.
    port = site.url.rsplit(":", 1)[1]
    egress = Egress.from_setting(f"127.0.0.1:{port},127.0.0.1:9")
    b = Browser(
        ToolsSettings().chromium_path,
        timeout=15,
        egress=egress,
        screenshot_dir=ARTIFACTS / "browser",
    )
    yield b
    await b.close()


async def test_navigate_text_links_and_click_in_real_chromium(
    browser: Browser, site: FakeSite
) -> None:
    async with task(browser, "browse-1") as t:
        text, ok = await t.call("browser_navigate", url=site.url + "/")
        assert ok, text
        assert f"Opened {site.url}/ (HTTP 200)" in text and "Title: Preserves" in text
        text, ok = await t.call("browser_text")
        assert ok and "Made by JavaScript" in text  # the page's script ran
        text, ok = await t.call("browser_links")
        assert ok
        assert f"- Orange marmalade: {site.url}/orange" in text
        assert "- Elsewhere: https://example.org/elsewhere" in text
        text, ok = await t.call("browser_click", text="Press")
        assert ok, text
        assert "Button pressed" in (await t.call("browser_text"))[0]
        text, ok = await t.call("browser_click", selector="a[href='/orange']")
        assert ok and f"Opened {site.url}/orange" in text and "Title: Orange" in text
        assert "Seville oranges are bitter." in (await t.call("browser_text"))[0]
        assert [s.url for s in t.run.sources] == [site.url + "/", site.url + "/orange"]
        shot = ARTIFACTS / "browser" / "browse-1-01.png"
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pw = await browser.browser()
    assert pw.contexts == []  # the task's context is closed after it


async def test_only_http_pages_can_be_opened(browser: Browser) -> None:
    async with task(browser, "browse-2") as t:
        for url in ("file:///etc/passwd", "chrome://settings", "javascript:alert(1)"):
            text, ok = await t.call("browser_navigate", url=url)
            assert not ok and "refused: only http:// and https:// may be opened" in text
        text, ok = await t.call("browser_text")
        assert not ok and "call browser_navigate first" in text


async def test_a_missing_page_and_an_unreachable_site_are_reported(
    browser: Browser, site: FakeSite
) -> None:
    async with task(browser, "browse-3") as t:
        text, ok = await t.call("browser_navigate", url=site.url + "/nowhere")
        assert ok and "(HTTP 404)" in text
        text, ok = await t.call("browser_navigate", url="http://127.0.0.1:9/")
        assert not ok and "could not open http://127.0.0.1:9/" in text
        text, ok = await t.call("browser_click", text="There is no such button")
        assert not ok


async def test_a_missing_chromium_is_a_clear_tool_error() -> None:
    b = Browser("/nonexistent/chromium", timeout=5, egress=Egress.from_setting("127.0.0.1:9"))
    async with task(b, "browse-4") as t:
        text, ok = await t.call("browser_navigate", url="http://127.0.0.1:9/")
    await b.close()
    assert not ok
    assert "Chromium was not found at /nonexistent/chromium" in text
    assert "SIDEKICK_CHROMIUM_PATH" in text


@pytest.fixture(scope="module")
def victim() -> Iterator[FakeServer]:
    """A service on loopback that is not operator-trusted (as the gateway's /metrics is)."""
    server = FakeServer()
    server.fallback = lambda rec: Response(200, {"secret": "inside"})
    server.start()
    yield server
    server.stop()


def spellings(port: int) -> list[str]:
    """Every way of writing an address the browser must never reach."""
    return [
        f"http://127.0.0.1:{port}/metrics",
        f"http://localhost:{port}/metrics",
        f"http://[::1]:{port}/metrics",
        f"http://[::ffff:127.0.0.1]:{port}/metrics",
        f"http://2130706433:{port}/metrics",
        f"http://0x7f000001:{port}/metrics",
        f"http://0x7f.1:{port}/metrics",
        f"http://0177.0.0.1:{port}/metrics",
        f"http://127.1:{port}/metrics",
        f"http://0.0.0.0:{port}/metrics",
        f"https://127.0.0.1:{port}/metrics",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.1.2.3/",
        "http://192.168.0.1/",
        "http://100.64.0.1/",
        "http://[fe80::1]/",
        "http://[fd00::1]/",
    ]


async def test_no_spelling_of_an_inside_address_is_opened(
    browser: Browser, victim: FakeServer
) -> None:
    port = int(victim.url.rsplit(":", 1)[1])
    async with task(browser, "browse-5") as t:
        for url in spellings(port):
            text, ok = await t.call("browser_navigate", url=url)
            assert not ok, (url, text)
            assert "refused:" in text or "could not open" in text, (url, text)
            assert "inside" not in text
    assert victim.requests == []


async def test_a_redirect_and_a_pages_own_requests_do_not_reach_inside(
    browser: Browser, site: FakeSite, victim: FakeServer
) -> None:
    inside = victim.url
    site.route("GET", "/bounce", lambda rec: Response(302, b"", {"Location": f"{inside}/x"}))
    site.page(
        "/lure",
        "<!doctype html><html><head><title>Lure</title></head><body><p id=r>waiting</p>"
        f'<img src="{inside}/img"><iframe src="{inside}/frame"></iframe>'
        f'<link rel="stylesheet" href="http://localhost:{inside.rsplit(":", 1)[1]}/css">'
        "<script>"
        f"fetch('{inside}/fetch').then(r => r.text())"
        ".then(t => { document.getElementById('r').textContent = 'GOT ' + t; })"
        ".catch(() => { document.getElementById('r').textContent = 'BLOCKED'; });"
        f"try {{ new WebSocket('{inside.replace('http', 'ws')}/ws'); }} catch (e) {{}}"
        f"navigator.sendBeacon('{inside}/beacon', 'x');"
        "</script></body></html>",
    )
    async with task(browser, "browse-6") as t:
        text, ok = await t.call("browser_navigate", url=site.url + "/bounce")
        assert not ok and "refused: 127.0.0.1 is a loopback address" in text, text
        text, ok = await t.call("browser_navigate", url=site.url + "/lure")
        assert ok, text
        assert "Requests the egress check refused" in text
        page_text, _ = await t.call("browser_text")
        for _ in range(100):  # until the page's own fetch has settled
            if "waiting" not in page_text:
                break
            await asyncio.sleep(0.1)
            page_text, _ = await t.call("browser_text")
        assert "BLOCKED" in page_text and "GOT" not in page_text
    assert victim.requests == []
