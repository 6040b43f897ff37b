"""The page's "How this was made" view under an answer: the request's timeline as text, in
order, with hostile model output (the worker's answer, the evaluator's feedback, a tool-ish
argument) shown as text and running nothing. Driven in Debian's Chromium against live services."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from playwright.async_api import Browser, expect

from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.harness import System
from tests.support.page import chromium, send
from tests.support.scripts import in_turn, verdict
from tests.support.systems import Systems
from tests.support.xss import HOSTILE_HTML, HOSTILE_MARKDOWN, nothing_ran, watched_page

HOSTILE_FEEDBACK = " ".join(HOSTILE_HTML[:6]) + " Name the moon."


@pytest.fixture(scope="module")
def made_system(systems: Systems) -> Iterator[System]:
    yield from systems.run(auth=True)


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with chromium() as b:
        yield b


async def test_how_this_was_made_shows_the_timeline_as_text_and_runs_nothing(
    made_system: System, browser: Browser, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script("fake-worker", lambda body: HOSTILE_MARKDOWN)
    in_turn(
        fake_llm,
        "fake-evaluator",
        verdict(False, 40, HOSTILE_FEEDBACK, ["<script>window.__pwned='s'</script>"]),
        verdict(True, 92, "Good."),
    )
    page = await watched_page(browser, made_system, "alice")
    await send(page, "search why tides happen")
    turn = page.locator(".turn").nth(0)
    await expect(turn.locator(".status")).to_contain_text("Completed")
    made = turn.locator(".made")
    await expect(made).to_be_visible()
    await made.locator("summary").click()
    entries = made.locator(".timeline > li")
    await expect(entries.first).to_contain_text("accepted by the gateway")
    texts = await entries.all_inner_texts()
    heads = [t.splitlines()[0] for t in texts]
    wanted = [
        "accepted by the gateway",
        "routed to the orchestrator",
        "decided: the GENERAL worker",
        "attempt 1 with GENERAL",
        "verdict on attempt 1: failed, score 40",
        "attempt 2 with GENERAL",
        "verdict on attempt 2: passed, score 92",
        "ended completed",
        "In all: ",
    ]
    assert len(heads) == len(wanted), heads
    assert all(w in h for w, h in zip(wanted, heads, strict=True)), heads
    whole = "\n".join(texts)
    assert HOSTILE_FEEDBACK.split(" Name")[0][:40] in whole  # shown as text, whole
    assert "Feedback carried in" in texts[5] and "Name the moon." in texts[5]
    assert "<script>window.__pwned='s'</script>" in texts[4]
    await nothing_ran(page)
    tags = await page.evaluate(
        "() => [...new Set([...document.querySelectorAll('.timeline *')]"
        ".map((el) => el.tagName.toLowerCase()))].sort()"
    )
    assert set(tags) <= {"li", "p", "dl", "dt", "dd"}, tags
    attributes = await page.evaluate(
        "() => [...document.querySelectorAll('.timeline *')]"
        ".flatMap((el) => [...el.attributes].map((a) => a.name))"
    )
    assert set(attributes) <= {"class"}, attributes
