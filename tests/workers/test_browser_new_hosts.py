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


async def test_a_click_to_another_host_sends_it_nothing_and_the_model_is_told_to_ask(
    browser: Browser, home: FakeSite, away: FakeSite
) -> None:
    start = len(away.requests)
    async with task_under(browser, "ask") as t:
        text, ok = await t.call("browser_navigate", url=home.url + "/")
        assert ok, text
        text, ok = await t.call("browser_click", selector="#out")
        assert not ok
        assert text == (
            f"ERROR: {asks_for(away_url(away, '/'), PAGE)}\nThe page is still {home.url}/."
        )
        text, ok = await t.call("browser_click", text="Send")  # a form to the other host
        assert not ok and asks_for(away_url(away, "/form?"), PAGE) in text
        text, ok = await t.call("browser_click", selector="#in")  # the same host opens
        assert ok and f"Opened {home.url}/two" in text, text
        assert "localhost" not in t.hosts.opened
    assert pages_since(away, start) == []


async def test_an_http_redirect_to_another_host_sends_it_nothing(
    browser: Browser, home: FakeSite, away: FakeSite
) -> None:
    start = len(away.requests)
    async with task_under(browser, "ask") as t:
        for path in ("/bounce", "/hop"):  # one hop, and a second hop after a same-host one
            text, ok = await t.call("browser_navigate", url=home.url + path)
            assert not ok
            assert text == f"ERROR: {asks_for(away_url(away, '/'), 'an HTTP redirect')}"
    assert pages_since(away, start) == []
    assert home.hits.count("/bounce") == 2 and home.hits.count("/hop") == 1


async def test_a_script_or_a_meta_refresh_to_another_host_sends_it_nothing(
    browser: Browser, home: FakeSite, away: FakeSite
) -> None:
    start = len(away.requests)
    async with task_under(browser, "ask") as t:
        for path in ("/script", "/refresh"):  # `location = …`, and a meta refresh
            text, _ = await t.call("browser_navigate", url=home.url + path)
            told = asks_for(away_url(away, "/"), PAGE)
            for _ in range(50):  # its navigation may be stopped just after the answer
                if told in text:
                    break
                await asyncio.sleep(0.1)
                text, _ = await t.call("browser_text")
            assert told in text, text
            assert (await t.call("browser_text"))[0].startswith(f"Page {home.url}{path}")
    assert pages_since(away, start) == []


async def test_a_pop_up_window_is_not_opened(
    browser: Browser, home: FakeSite, away: FakeSite
) -> None:
    start = len(away.requests)
    async with task_under(browser, "ask") as t:
        await t.call("browser_navigate", url=home.url + "/")
        text, _ = await t.call("browser_click", selector="#pop")
        popup = away_url(away, "/popup")
        if popup not in text:
            text, _ = await t.call("browser_text")
        assert (
            f"The browser did not open {popup}: the page tried to open it in a new window, and "
            "new windows are not opened" in text
        ), text
    assert pages_since(away, start) == []


async def test_under_deny_the_model_is_told_the_policy_forbids_it(
    browser: Browser, home: FakeSite, away: FakeSite
) -> None:
    start = len(away.requests)
    async with task_under(browser, "deny") as t:
        text, ok = await t.call("browser_navigate", url=home.url + "/bounce")
        assert not ok
        assert text.endswith(
            "Nothing was loaded from it. The operator's approval policy forbids opening a new "
            "host (the variable approval policy says deny for browser.new_domain)."
        ), text
        assert "call browser_navigate" not in text
    assert pages_since(away, start) == []


async def test_under_allow_every_navigation_goes_through_and_counts_its_host_opened(
    browser: Browser, home: FakeSite, away: FakeSite
) -> None:
    start = len(away.requests)
    async with task_under(browser, "allow") as t:
        text, ok = await t.call("browser_navigate", url=home.url + "/bounce")
        assert ok and f"Opened {away_url(away, '/')} (HTTP 200)" in text, text
        await t.call("browser_navigate", url=home.url + "/")
        text, ok = await t.call("browser_click", selector="#out")
        assert ok and "Title: Away" in text, text
        assert "localhost" in t.hosts.opened
    assert pages_since(away, start) == ["/", "/"]


async def test_a_frame_of_another_host_is_not_a_navigation_and_stays_under_the_egress_wall(
    browser: Browser, home: FakeSite, away: FakeSite
) -> None:
    start = len(away.requests)
    async with task_under(browser, "ask") as t:
        text, ok = await t.call("browser_navigate", url=home.url + "/framed")
        assert ok and "did not open" not in text, text
    assert pages_since(away, start) == ["/frame"]
