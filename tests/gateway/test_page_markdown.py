"""The web page renders answers as Markdown, and hostile answers run nothing: driven in
Debian's Chromium against live services whose model (and search engine) answer with attacks.
Its own system, with a fake Brave Search, so answers can carry sources."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from playwright.async_api import Browser, Locator, Page, expect

from tests.support.fakes.brave import FakeBrave, result
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.gateway_client import AuthClient, bearer
from tests.support.harness import System
from tests.support.page import PHONE, chromium, open_page, send, shot, sign_in
from tests.support.scripts import decide
from tests.support.systems import Systems
from tests.support.workers_support import every_kind
from tests.support.xss import (
    HOSTILE_HTML,
    HOSTILE_MARKDOWN,
    direct_answer,
    nothing_ran,
    watched_page,
)


@pytest.fixture(scope="module")
def md_system(systems: Systems, brave: FakeBrave) -> Iterator[System]:
    yield from every_kind(systems, auth=True, brave=brave)


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with chromium() as b:
        yield b


async def completed_turn(
    browser: Browser, system: System, principal: str, message: str
) -> tuple[Page, Locator]:
    """`message` sent from a watched page signed in as `principal`, once its turn shows
    Completed: the page and the turn."""
    page = await watched_page(browser, system, principal)
    await send(page, message)
    turn = page.locator(".turn").nth(0)
    await expect(turn.locator(".status")).to_contain_text("Completed")
    return page, turn


async def test_an_answer_renders_as_markdown_with_copyable_code_and_safe_links(
    md_system: System, browser: Browser, fake_llm: FakeOpenAI
) -> None:
    answer = (
        "**Tides** come from the *moon*; see [the health page](" + md_system.http_url + "/healthz)."
        "\n\n- first\n- second\n\n```python\nprint('hi')\n```\n"
    )
    fake_llm.script("fake-frontline", direct_answer(answer))
    page = await watched_page(browser, md_system, "alice")
    await send(page, "hi, explain tides")
    turn = page.locator(".turn").nth(0)
    await expect(turn.locator(".status")).to_have_text("Completed")
    rendered = turn.locator(".answer")
    await expect(rendered.locator("strong")).to_have_text("Tides")
    await expect(rendered.locator("em")).to_have_text("moon")
    await expect(rendered.locator("li")).to_have_text(["first", "second"])
    await expect(rendered.locator("pre code")).to_have_text("print('hi')")
    assert "**" not in await rendered.inner_text()

    await rendered.get_by_role("button", name="Copy code").click()
    await expect(rendered.get_by_role("button", name="Copy code")).to_have_text("Copied")
    assert await page.evaluate("navigator.clipboard.readText()") == "print('hi')\n"

    link = rendered.get_by_role("link", name="the health page")
    await expect(link).to_have_attribute("target", "_blank")
    await expect(link).to_have_attribute("rel", "noopener noreferrer")
    async with page.context.expect_page() as opened:
        await link.click()
    tab = await opened.value
    await tab.wait_for_load_state()
    assert tab.url == md_system.http_url + "/healthz"
    assert await tab.evaluate("window.opener") is None  # the answer's page cannot reach ours
    await tab.close()
    await nothing_ran(page)
    await page.screenshot(path=shot("page-markdown.png"), full_page=True)


async def test_hostile_markdown_in_a_streamed_answer_runs_nothing(
    md_system: System, browser: Browser, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script("fake-frontline", direct_answer(HOSTILE_MARKDOWN, chunk_delay=0.01))
    page = await watched_page(browser, md_system, "bob")
    dialogs: list[str] = []
    page.on("dialog", lambda d: dialogs.append(d.message))
    await send(page, "hello")
    turn = page.locator(".turn").nth(0)
    await expect(turn.locator(".status")).to_have_text("Completed")
    rendered = turn.locator(".answer")
    # Raw HTML is shown as text, never parsed.
    await expect(rendered).to_contain_text("<img src=x onerror=")
    await expect(rendered).to_contain_text("<script>window.__pwned='script'</script>")
    # Unsafe links stay text; the image became a link (the CSP would block it anyway).
    await expect(rendered.get_by_role("link", name="a javascript link")).to_have_count(0)
    await expect(rendered.get_by_role("link", name="Image: a tracking pixel")).to_have_attribute(
        "href", "http://127.0.0.1:9/pixel.png"
    )
    for text in ("raw anchor", "a javascript link", "an encoded one", "a data link"):
        await rendered.get_by_text(text).first.click()
    await nothing_ran(page)
    assert dialogs == []


async def test_hostile_search_results_and_answers_through_the_orchestrator_run_nothing(
    md_system: System, browser: Browser, fake_llm: FakeOpenAI, brave: FakeBrave
) -> None:
    query = "search hostile pages"
    brave.web[query] = [
        result("<img src=x onerror=\"window.__pwned='title'\">", "javascript:window.__pwned=1"),
        result("A fine page", "https://fine.example/page"),
    ]
    fake_llm.script("fake-orchestrator", decide("SEARCH", query, query=query))
    fake_llm.script("fake-worker", lambda body: HOSTILE_MARKDOWN + "\nSee [1] and [2].")
    page, turn = await completed_turn(browser, md_system, "carol", query)
    sources = turn.locator(".sources li")
    await expect(sources).to_have_count(2)
    # The search client strips tags from titles; the javascript: address stays text.
    await expect(sources.nth(0)).to_contain_text("javascript:window.__pwned=1")
    await expect(sources.nth(0).locator("a")).to_have_count(0)
    await expect(sources.nth(1).get_by_role("link", name="A fine page")).to_have_attribute(
        "href", "https://fine.example/page"
    )
    await nothing_ran(page)


async def test_the_sanitizer_alone_removes_everything_that_could_run(
    md_system: System, browser: Browser
) -> None:
    page = await watched_page(browser, md_system, "dave")
    kept = await page.evaluate(
        """async (payloads) => {
        const { sanitize } = await import("/static/render.js");
        const out = [];
        for (const html of payloads) {
          const box = document.createElement("div");
          box.className = "answer";
          box.appendChild(sanitize(html));
          document.body.appendChild(box);  // live in the page: anything left would run now
          out.push(box.innerHTML);
        }
        await new Promise((r) => setTimeout(r, 50));
        return out;
      }""",
        HOSTILE_HTML,
    )
    for html, clean in zip(HOSTILE_HTML, kept, strict=True):
        lowered = clean.lower()
        for bad in ("<script", "<svg", "<math", "<img", "<iframe", "<object", "<embed", "<form"):
            assert bad not in lowered, (html, clean)
        for bad in ("onerror", "onload", "onbegin", "ontoggle", "javascript:", "style=", "id="):
            assert bad not in lowered, (html, clean)
    assert await page.evaluate("document.getElementById('log').tagName") == "OL"
    # Not the CSP's count here: DOMPurify parses raw HTML in an inert document, where nothing
    # runs, but Chromium still reports each inline handler it parsed there to the CSP.
    await nothing_ran(page, csp_quiet=False)


async def test_sources_are_a_numbered_list_matching_the_answers_citations(
    md_system: System, browser: Browser, fake_llm: FakeOpenAI, brave: FakeBrave
) -> None:
    query = "search ocean tides"
    brave.web[query] = [
        result("Moon and tides", "https://tides.example/moon", "the moon pulls"),
        result("Wind and waves", "https://waves.example/wind", "the wind pushes", "2 days ago"),
    ]
    fake_llm.script("fake-orchestrator", decide("SEARCH", query, query=query))
    fake_llm.script("fake-worker", lambda body: "The **moon** pulls [1]; the wind pushes [2].")
    page, turn = await completed_turn(browser, md_system, "erin", query)
    items = turn.locator(".sources li")
    await expect(items).to_have_count(2)
    assert await items.evaluate_all("(lis) => lis.map((li) => li.value)") == [1, 2]
    first = items.nth(0).get_by_role("link", name="Moon and tides")
    await expect(first).to_have_attribute("href", "https://tides.example/moon")
    await expect(first).to_have_attribute("target", "_blank")
    await expect(first).to_have_attribute("rel", "noopener noreferrer")
    await expect(items.nth(1)).to_contain_text("waves.example")
    # The text list the worker appended for plain clients gives way to the structured one.
    answer = turn.locator(".answer")
    await expect(answer).to_have_text("The moon pulls [1]; the wind pushes [2].")
    await page.screenshot(path=shot("page-sources.png"), full_page=True)

    # Research answers cite a subset of what was found, keeping the numbers: [2] stays [2].
    split = await page.evaluate(
        """async () => {
        const { splitSources } = await import("/static/render.js");
        const text = "B says so [2], E agrees [5].\\n\\nSources:\\n[2] [B](https://b.example/)\\n"
          + "[5] [E](https://e.example/x_(y)) (1 day ago)\\n\\nNote: not fully up to date.";
        const found = splitSources(text, [{title: "B", url: "https://b.example/"},
                                          {title: "E", url: "https://e.example/x_(y)"}]);
        const other = splitSources(text, [{title: "Z", url: "https://z.example/"}]);
        return [found.body, found.sources.map((s) => s.n), other.body === text,
                other.sources.map((s) => s.n)];
      }"""
    )
    assert split == [
        "B says so [2], E agrees [5].\n\nNote: not fully up to date.",
        [2, 5],
        True,
        [1],
    ]


async def test_streaming_re_renders_only_the_streaming_answer(
    md_system: System, browser: Browser, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script("fake-frontline", direct_answer("A **first** answer."))
    page = await watched_page(browser, md_system, "frank")
    await send(page, "hello")
    first = page.locator(".turn").nth(0)
    await expect(first.locator(".status")).to_have_text("Completed")
    await first.evaluate(
        """(node) => {
        window.__touched = 0;
        new MutationObserver((m) => { window.__touched += m.length; })
          .observe(node, { subtree: true, childList: true, characterData: true });
      }"""
    )
    words = [f"word{n}" for n in range(60)]
    fake_llm.script("fake-frontline", direct_answer("A *second* " + " ".join(words), 0.01))
    await send(page, "hello again")
    second = page.locator(".turn").nth(1)
    await expect(second.locator(".status")).to_have_text("Completed")
    await expect(second.locator(".answer em")).to_have_text("second")
    await expect(second.locator(".answer")).to_contain_text("word59")
    # The earlier answer was not rebuilt while the new one streamed, and the new one was
    # rendered at most once per chunk (once per animation frame: usually far fewer).
    assert await page.evaluate("window.__touched") == 0
    renders = int(await second.locator(".answer").get_attribute("data-renders") or "0")
    assert 1 <= renders <= len(words) + 3


async def test_the_sidebar_lists_past_conversations_and_reopens_one(
    md_system: System, browser: Browser
) -> None:
    page = await watched_page(browser, md_system, "grace")
    sidebar = page.get_by_role("navigation", name="Conversations")
    await expect(sidebar).to_contain_text("No earlier conversations yet.")
    first_session = await page.locator("#session-id").inner_text()
    await send(page, "hello about the tides")
    await expect(page.locator(".turn .status")).to_have_text("Completed")
    await page.get_by_role("button", name="New session").click()
    await expect(page.locator("#session-id")).not_to_have_text(first_session)
    await send(page, "hello about the winds")
    await expect(page.locator(".turn .status")).to_have_text("Completed")

    entries = sidebar.get_by_role("button")
    await expect(entries).to_have_count(2)
    await expect(entries.nth(0)).to_contain_text("hello about the winds")  # newest first
    await expect(entries.nth(0)).to_have_attribute("aria-current", "true")
    await expect(entries.nth(1)).to_contain_text("hello about the tides")
    await page.screenshot(path=shot("page-sidebar.png"), full_page=True)

    await entries.nth(1).click()
    await expect(page.locator("#session-id")).to_have_text(first_session)
    await expect(page.locator(".turn .user .text")).to_have_text("hello about the tides")
    await expect(page.locator(".turn .answer")).to_contain_text("Hello there!")
    await expect(entries.nth(1)).to_have_attribute("aria-current", "true")
    await expect(page.locator("#connection")).to_have_text("Connected")
    await send(page, "hello once more")  # the reopened conversation goes on
    await expect(page.locator(".turn .status").nth(1)).to_have_text("Completed")


async def test_on_a_phone_the_sidebar_folds_behind_a_button(
    md_system: System, browser: Browser
) -> None:
    page = await open_page(browser, PHONE)
    await sign_in(page, md_system, "heidi")
    await send(page, "hello from the phone")
    await expect(page.locator(".turn .status")).to_have_text("Completed")
    sidebar = page.get_by_role("navigation", name="Conversations")
    await expect(sidebar).to_be_hidden()
    toggle = page.get_by_role("button", name="Conversations")
    await toggle.click()
    await expect(toggle).to_have_attribute("aria-expanded", "true")
    await expect(sidebar.get_by_role("button")).to_contain_text(["hello from the phone"])
    overflow = await page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0
    await page.screenshot(path=shot("page-phone-sidebar.png"), full_page=True)


async def test_the_sessions_api_shows_a_principal_only_its_own_conversations(
    md_system: System,
) -> None:
    async with AuthClient(md_system.ws_url, "ivan", events=True) as ivan:
        await ivan.ask("hello, ivan's secret plan")
        await ivan.ask("hello again")
    async with httpx.AsyncClient(base_url=md_system.http_url, timeout=30) as http:
        assert (await http.get("/api/sessions")).status_code == 401
        created = await http.post(
            "/api/workflows", json={"text": "a job to plan"}, headers=bearer("ivan")
        )
        assert created.status_code == 201
        mine = (await http.get("/api/sessions", headers=bearer("ivan"))).json()["sessions"]
        # Workflows are not chat conversations (they have their own list).
        assert [(s["uuid"], s["title"], s["requests"]) for s in mine] == [
            (ivan.uuid, "hello, ivan's secret plan", 2)
        ]
        theirs = (await http.get("/api/sessions", headers=bearer("judy"))).json()["sessions"]
        assert all(s["uuid"] != ivan.uuid for s in theirs)
        bad = await http.get("/api/sessions?limit=lots", headers=bearer("ivan"))
        assert bad.status_code == 422


async def test_the_favicon_is_served(md_system: System) -> None:
    async with httpx.AsyncClient(base_url=md_system.http_url, timeout=30) as http:
        ico = await http.get("/favicon.ico")
        assert ico.status_code == 200
        assert ico.headers["content-type"] == "image/x-icon"
        assert ico.content[:4] == b"\x00\x00\x01\x00"  # an ICO file's header
        svg = await http.get("/static/favicon.svg")
        assert svg.status_code == 200
        assert svg.headers["content-type"].startswith("image/svg+xml")
