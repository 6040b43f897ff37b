"""The web page at `/`, driven by Debian's Chromium (headless, through Playwright) against the
live services. Screenshots go to tests/artifacts/."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from playwright.async_api import Browser, expect

from tests.support.fakes.openai_server import FakeOpenAI, Reply
from tests.support.gateway_client import token
from tests.support.harness import System
from tests.support.page import PHONE, chromium, open_page, send, shot, sign_in
from tests.support.scripts import (
    default_frontline,
    evaluator_asks,
    evaluator_held,
    in_turn,
    verdict,
)


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with chromium() as b:
        yield b


def streaming_greeting(text: str, delay: float) -> Any:
    def script(body: dict[str, Any]) -> Reply | str | dict[str, Any]:
        if body.get("response_format"):
            return default_frontline(body)
        return Reply(text, chunk_delay=delay)

    return script


async def test_an_answer_streams_in_and_each_attempts_verdict_and_feedback_show(
    secure_system: System, browser: Browser, fake_llm: FakeOpenAI
) -> None:
    words = "Hello! This answer arrives on the page word by word, as the model writes it."
    fake_llm.script("fake-frontline", streaming_greeting(words, 0.15))
    in_turn(
        fake_llm,
        "fake-worker",
        "A first, vague draft.",
        "Three examples: tides, winds and currents.",
    )
    in_turn(
        fake_llm,
        "fake-evaluator",
        verdict(False, 40, "Too vague: name three examples.", ["List three examples"]),
        verdict(True, 92, "Good: three clear examples."),
    )
    page = await open_page(browser)
    await sign_in(page, secure_system, "pat")

    await send(page, "hi there")
    first = page.locator(".turn").nth(0)
    # Mid-stream: some of the answer is shown while the request is still busy.
    await expect(first.locator(".assistant[aria-busy='true'] .answer")).to_contain_text("Hello!")
    assert (await first.locator(".answer").inner_text()) != words
    await expect(first.locator(".answer")).to_have_text(words)
    await expect(first.locator(".status")).to_have_text("Completed")
    await expect(first.locator(".steps")).to_contain_text("Answered directly")

    await send(page, "search for examples of ocean forces", criteria="three examples")
    second = page.locator(".turn").nth(1)
    await expect(second.locator(".criteria")).to_have_text("Success criteria: three examples")
    await expect(second.locator(".answer")).to_have_text(
        "Three examples: tides, winds and currents."
    )
    steps = second.locator(".steps")
    await expect(steps).to_contain_text("Routed to the orchestrator")
    await expect(steps).to_contain_text("Attempt 1 with GENERAL")
    await expect(steps.locator("li", has_text="Attempt 1 judged")).to_have_text(
        "Attempt 1 judged: not passed, score 40/100. Feedback: Too vague: name three examples. "
        "Suggestions: List three examples"
    )
    passed = steps.locator("li", has_text="Attempt 2 judged")
    await expect(passed).to_contain_text("passed, score 92/100. Feedback: Good")
    await expect(passed).to_be_visible()
    await expect(second.locator(".status")).to_have_text("Completed · 2 attempts · score 92/100")
    trace = second.locator(".trace-id")
    await expect(trace).to_have_text(re.compile(r"^[0-9a-f]{32}$"))
    await expect(second.get_by_role("button", name="Copy trace id")).to_be_visible()
    await page.screenshot(path=shot("page-answer-and-verdicts.png"), full_page=True)


async def test_the_final_note_shows_when_attempts_run_out(
    secure_system: System, browser: Browser, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script("fake-evaluator", lambda body: verdict(False, 30, "Still missing the dates."))
    page = await open_page(browser)
    await sign_in(page, secure_system, "uma")
    await send(page, "search for the dates")
    turn = page.locator(".turn").nth(0)
    await expect(turn.locator(".status")).to_contain_text("Partial answer: attempts ran out")
    await expect(turn.locator(".note")).to_have_text(
        "Final note: the evaluator still found this lacking: Still missing the dates."
    )


async def test_the_cancel_button_stops_a_running_request(
    secure_system: System, browser: Browser, fake_llm: FakeOpenAI
) -> None:
    with evaluator_held(fake_llm):
        page = await open_page(browser)
        await sign_in(page, secure_system, "quinn")
        await send(page, "search for something slow")
        turn = page.locator(".turn").nth(0)
        await expect(turn.locator(".steps")).to_contain_text("Attempt 1")
        await turn.get_by_role("button", name="Cancel").click()
        await expect(turn.locator(".status")).to_have_text("Cancelled")
        await expect(turn.get_by_role("button", name="Cancel")).to_be_hidden()
        await page.screenshot(path=shot("page-cancelled.png"), full_page=True)


async def test_a_clarification_question_is_answered_inline(
    secure_system: System, browser: Browser, fake_llm: FakeOpenAI
) -> None:
    evaluator_asks(fake_llm)
    page = await open_page(browser)
    await sign_in(page, secure_system, "rupert")
    await send(page, "search the weather for my trip")
    turn = page.locator(".turn").nth(0)
    await expect(turn.locator(".status")).to_have_text("Waiting for your answers")
    answer = turn.get_by_label("Which city?")
    await expect(answer).to_be_focused()
    await page.screenshot(path=shot("page-clarification.png"), full_page=True)
    await answer.fill("Lisbon")
    await answer.press("Enter")
    await expect(turn.locator(".steps")).to_contain_text("You answered: Lisbon")
    await expect(turn.locator(".status")).to_contain_text("Completed")
    await expect(turn.locator(".answer")).to_contain_text("Answer to:")
    assert "Lisbon" in json.dumps(fake_llm.chat_calls("fake-worker")[-1]["messages"])


async def test_a_reload_shows_the_history_and_new_session_starts_empty(
    secure_system: System, browser: Browser
) -> None:
    page = await open_page(browser)
    await sign_in(page, secure_system, "sybil")
    session = await page.locator("#session-id").inner_text()
    await send(page, "hello, remember me")
    await expect(page.locator(".turn .status")).to_have_text("Completed")
    answer = await page.locator(".turn .answer").inner_text()

    await page.reload()
    await expect(page.locator("#connection")).to_have_text("Connected")
    assert await page.locator("#session-id").inner_text() == session
    await expect(page.locator(".turn .user .text")).to_have_text("hello, remember me")
    await expect(page.locator(".turn .answer")).to_have_text(answer)
    await page.screenshot(path=shot("page-history.png"), full_page=True)

    await page.get_by_role("button", name="New session").click()
    await expect(page.locator("#session-id")).not_to_have_text(session)
    await expect(page.locator(".turn")).to_have_count(0)
    await expect(page.locator("#connection")).to_have_text("Connected")


async def test_the_page_works_from_the_keyboard_on_a_phone_sized_window(
    secure_system: System, browser: Browser
) -> None:
    page = await open_page(browser, PHONE)
    await page.goto(secure_system.http_url + "/")
    await expect(page.get_by_label("Access token")).to_be_focused()
    await page.keyboard.type(token("uma"))
    await page.keyboard.press("Enter")
    await expect(page.locator("#connection")).to_have_text("Connected")
    # Every control has an accessible name; the conversation is a log region.
    for label in ("Message", "Success criteria (optional)"):
        await expect(page.get_by_label(label, exact=True)).to_be_visible()
    await expect(page.get_by_role("log")).to_be_attached()
    await expect(page.get_by_role("button", name="Send")).to_be_visible()

    await page.get_by_label("Message", exact=True).focus()
    await page.keyboard.type("hello from my phone")
    await page.keyboard.press("Enter")
    await expect(page.locator(".turn .status")).to_have_text("Completed")
    await page.keyboard.press("Shift+Tab")  # back out of the message box: focus moves on
    assert await page.evaluate("document.activeElement.id") != "message"
    overflow = await page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, "nothing is wider than the phone's screen"
    await page.screenshot(path=shot("page-phone.png"), full_page=True)


async def test_two_messages_sent_back_to_back_get_two_answers_in_order(
    secure_system: System, browser: Browser, fake_llm: FakeOpenAI
) -> None:
    def frontline(body: dict[str, Any]) -> Reply | str | dict[str, Any]:
        if body.get("response_format"):
            return default_frontline(body)
        if "slowly" in json.dumps(body["messages"][-1]):
            return Reply("The first answer arrives slowly, word by word.", chunk_delay=0.15)
        return Reply("The second answer.")

    fake_llm.script("fake-frontline", frontline)
    page = await open_page(browser)
    await sign_in(page, secure_system, "dora")
    await send(page, "answer me slowly")
    await send(page, "and then quickly")
    first, second = page.locator(".turn").nth(0), page.locator(".turn").nth(1)
    await expect(second.locator(".steps")).to_contain_text("Queued")
    await expect(first.locator(".answer")).to_have_text(
        "The first answer arrives slowly, word by word."
    )
    await expect(second.locator(".answer")).to_have_text("The second answer.")
    await expect(second.locator(".status")).to_have_text("Completed")
    await page.screenshot(path=shot("page-two-messages.png"), full_page=True)
