"""`browser.new_domain` in the browser itself: under `ask` or `deny`, a page on an opened host
cannot take the browser to another host (a click, a form, a script, an HTTP redirect, a pop-up):
the other host's server gets no request at all, and the tool's result says what was stopped and
what to do. Under `allow` the same navigations go through. Real headless Chromium, two local
sites: `home` (opened, as 127.0.0.1) and `away` (reached as localhost, so another host; both
operator-trusted for the egress wall, which is not what stops anything here)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

import pytest

from contracts.approvals import PolicyDecision
from services.runtime.approvals.policy import Policy
from services.runtime.walls.egress import Egress
from services.workers.tools.browser import Browser
from services.workers.tools.hosts import NEW_DOMAIN, Hosts
from services.workers.tools.settings import ToolsSettings
from tests.support.browsing import Task, task
from tests.support.fakes.http import Response
from tests.support.fakes.site import FakeSite

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def away() -> Iterator[FakeSite]:
    with FakeSite() as fake:
        fake.page("/", "<title>Away</title><p>the other host</p>")
        fake.page("/frame", "<title>Frame</title><p>framed</p>")
        yield fake


def away_url(away: FakeSite, path: str) -> str:
    return f"http://localhost:{away.url.rsplit(':', 1)[1]}{path}"


def pages_since(site: FakeSite, start: int) -> list[str]:
    """The paths of what `site` was asked for since its `start`th request (the browser's own
    favicon fetches aside)."""
    return [p for p in site.hits[start:] if p != "/favicon.ico"]


@pytest.fixture(scope="module")
def home(away: FakeSite) -> Iterator[FakeSite]:
    far = away_url(away, "/")
    with FakeSite() as fake:
        fake.page(
            "/",
            f'<title>Home</title><a id="out" href="{far}">Away</a> <a id="in" href="/two">Two</a>'
            f'<form id="f" action="{away_url(away, "/form")}"><button>Send</button></form>'
            f'<a id="pop" target="_blank" href="{away_url(away, "/popup")}">Pop</a>',
        )
        fake.page("/two", "<title>Two</title><p>still home</p>")
        fake.page("/script", f"<title>Script</title><script>location = {json.dumps(far)}</script>")
        fake.page(
            "/refresh", f'<title>Refresh</title><meta http-equiv="refresh" content="0;url={far}">'
        )
        fake.page("/framed", f'<title>Framed</title><iframe src="{away_url(away, "/frame")}">')
        fake.route("GET", "/bounce", lambda rec: Response(302, b"", {"Location": far}))
        fake.route("GET", "/hop", lambda rec: Response(302, b"", {"Location": "/bounce"}))
        yield fake


@pytest.fixture(scope="module")
async def browser(home: FakeSite, away: FakeSite) -> AsyncIterator[Browser]:
    egress = Egress.from_setting(f"{home.host_port},localhost:{away.url.rsplit(':', 1)[1]}")
    b = Browser(ToolsSettings().chromium_path, timeout=15, egress=egress)
    yield b
    await b.close()


def task_under(browser: Browser, decision: PolicyDecision) -> AbstractAsyncContextManager[Task]:
    """One task's browser tools, on a run whose policy says `decision` for a new host and
    which has opened the home host (as the approval gate does before browser_navigate)."""
    ruling = Policy.configured(f"{NEW_DOMAIN}={decision}", None).ruling(NEW_DOMAIN)
    return task(browser, "r", Hosts(ruling, opened={"127.0.0.1"}))


def asks_for(url: str, via: str) -> str:
    return (
        f"The browser did not open {url}: {via} led there, to localhost, a host not opened in "
        "this run. Nothing was loaded from it. The operator's approval policy asks a person "
        f"before the browser opens a new host: to go there, call browser_navigate with {url}, "
        "and a person will be asked to approve it."
    )


PAGE = "the page (a link, a form or a script)"


@dataclass
class Sites:
    """A test's browser and two sites, and how many requests `away` had when the test began."""

    browser: Browser
    home: FakeSite
    away: FakeSite
    start: int

    def task(self, decision: PolicyDecision) -> AbstractAsyncContextManager[Task]:
        return task_under(self.browser, decision)

    def far(self, path: str) -> str:
        """`path` on the away host, as the browser reaches it."""
        return away_url(self.away, path)

    def away_got(self) -> list[str]:
        """The paths the away host was asked for during this test."""
        return pages_since(self.away, self.start)


@pytest.fixture
def sites(browser: Browser, home: FakeSite, away: FakeSite) -> Sites:
    return Sites(browser, home, away, len(away.requests))


async def test_a_click_to_another_host_sends_it_nothing_and_the_model_is_told_to_ask(
    sites: Sites,
) -> None:
    async with sites.task("ask") as t:
        text, ok = await t.call("browser_navigate", url=sites.home.url + "/")
        assert ok, text
        text, ok = await t.call("browser_click", selector="#out")
        assert not ok
        assert text == (
            f"ERROR: {asks_for(sites.far('/'), PAGE)}\nThe page is still {sites.home.url}/."
        )
        text, ok = await t.call("browser_click", text="Send")  # a form to the other host
        assert not ok and asks_for(sites.far("/form?"), PAGE) in text
        text, ok = await t.call("browser_click", selector="#in")  # the same host opens
        assert ok and f"Opened {sites.home.url}/two" in text, text
        assert "localhost" not in t.hosts.opened
    assert sites.away_got() == []


async def test_an_http_redirect_to_another_host_sends_it_nothing(sites: Sites) -> None:
    async with sites.task("ask") as t:
        for path in ("/bounce", "/hop"):  # one hop, and a second hop after a same-host one
            text, ok = await t.call("browser_navigate", url=sites.home.url + path)
            assert not ok
            assert text == f"ERROR: {asks_for(sites.far('/'), 'an HTTP redirect')}"
    assert sites.away_got() == []
    assert sites.home.hits.count("/bounce") == 2 and sites.home.hits.count("/hop") == 1


async def test_a_script_or_a_meta_refresh_to_another_host_sends_it_nothing(sites: Sites) -> None:
    async with sites.task("ask") as t:
        for path in ("/script", "/refresh"):  # `location = …`, and a meta refresh
            text, _ = await t.call("browser_navigate", url=sites.home.url + path)
            told = asks_for(sites.far("/"), PAGE)
            for _ in range(50):  # its navigation may be stopped just after the answer
                if told in text:
                    break
                await asyncio.sleep(0.1)
                text, _ = await t.call("browser_text")
            assert told in text, text
            assert (await t.call("browser_text"))[0].startswith(f"Page {sites.home.url}{path}")
    assert sites.away_got() == []


async def test_a_pop_up_window_is_not_opened(sites: Sites) -> None:
    async with sites.task("ask") as t:
        await t.call("browser_navigate", url=sites.home.url + "/")
        text, _ = await t.call("browser_click", selector="#pop")
        popup = sites.far("/popup")
        if popup not in text:
            text, _ = await t.call("browser_text")
        assert (
            f"The browser did not open {popup}: the page tried to open it in a new window, and "
            "new windows are not opened" in text
        ), text
    assert sites.away_got() == []


async def test_under_deny_the_model_is_told_the_policy_forbids_it(sites: Sites) -> None:
    async with sites.task("deny") as t:
        text, ok = await t.call("browser_navigate", url=sites.home.url + "/bounce")
        assert not ok
        assert text.endswith(
            "Nothing was loaded from it. The operator's approval policy forbids opening a new "
            "host (the variable approval policy says deny for browser.new_domain)."
        ), text
        assert "call browser_navigate" not in text
    assert sites.away_got() == []


async def test_under_allow_every_navigation_goes_through_and_counts_its_host_opened(
    sites: Sites,
) -> None:
    async with sites.task("allow") as t:
        text, ok = await t.call("browser_navigate", url=sites.home.url + "/bounce")
        assert ok and f"Opened {sites.far('/')} (HTTP 200)" in text, text
        await t.call("browser_navigate", url=sites.home.url + "/")
        text, ok = await t.call("browser_click", selector="#out")
        assert ok and "Title: Away" in text, text
        assert "localhost" in t.hosts.opened
    assert sites.away_got() == ["/", "/"]


async def test_a_frame_of_another_host_is_not_a_navigation_and_stays_under_the_egress_wall(
    sites: Sites,
) -> None:
    async with sites.task("ask") as t:
        text, ok = await t.call("browser_navigate", url=sites.home.url + "/framed")
        assert ok and "did not open" not in text, text
    assert sites.away_got() == ["/frame"]
