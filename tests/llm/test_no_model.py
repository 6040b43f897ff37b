"""With no model configured everything starts, and each surface says the same one sentence:
the variables to set, an example, and `sidekick doctor` (services/runtime/base/errors.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from playwright.async_api import WebSocketRoute, expect

from services.runtime.base.errors import no_model_message
from tests.support.harness import Client, System, sidekick
from tests.support.page import chromium, open_page, send, shot
from tests.support.protocols import chat_env
from tests.support.systems import Systems


@pytest.fixture(scope="module")
def bare_system(systems: Systems) -> Iterator[System]:
    yield from systems.run(llm=False)


def test_the_sentence_names_the_variables_an_example_and_the_doctor() -> None:
    sentence = no_model_message()
    for part in ("SIDEKICK_LLM_BASE_URL", "SIDEKICK_LLM_MODEL", "SIDEKICK_LLM_API_KEY"):
        assert part in sentence
    assert "OPENAI_API_KEY" in sentence
    assert "for example `SIDEKICK_LLM_BASE_URL=http://" in sentence
    assert "`sidekick doctor`" in sentence
    assert sentence.count(". ") == 0 and sentence.endswith("."), "one sentence"


async def test_an_old_client_reads_the_sentence_as_text_then_the_end(bare_system: System) -> None:
    async with Client(bare_system.ws_url) as client:
        convo = await client.ask("hello")
    # Only the seed's keys: the TypeScript seed's client shows any other as raw JSON.
    assert convo.errors == []
    assert all(set(f) <= {"on_chat_model_stream", "on_chat_model_end"} for f in convo.frames)
    assert no_model_message() in convo.text
    assert convo.frames[-1] == {"on_chat_model_end": True}


async def test_an_event_client_gets_the_sentence_in_its_error_and_a_failed_end(
    bare_system: System,
) -> None:
    convo = await bare_system.ask("hello")
    (error,) = convo.errors
    assert (error["code"], error["message"]) == ("llm_not_configured", no_model_message())
    assert convo.end["status"] == "failed"


async def test_the_ack_comes_before_every_other_frame_of_its_request(bare_system: System) -> None:
    # The gateway sends the ack (and a queued frame) as soon as the request is written, before
    # it is published or can be started by the request before it, so no frame of the request
    # can overtake them (a request with no model ends within milliseconds).
    async with Client(bare_system.ws_url, events=True) as client:
        for _ in range(30):
            convo = await client.ask("hello")
            request_id = convo.end["request_id"]
            ours = [f for f in convo.frames if f.get("request_id") == request_id]
            assert ours[0] == {"event": "ack", "request_id": request_id, "action": "message"}
            queued = [n for n, f in enumerate(ours) if f.get("event") == "queued"]
            assert queued in ([], [1]), ours


def test_sidekick_chat_prints_the_sentence_as_is(bare_system: System) -> None:
    done = sidekick("chat", "--url", bare_system.ws_url, input="hello\n", env=chat_env())
    assert done.returncode == 0, done.stderr
    assert f"error: {no_model_message()}" in done.stdout
    assert "[error" not in done.stdout


async def test_the_page_shows_the_sentence_as_text_and_stays_usable(bare_system: System) -> None:
    async with chromium() as browser:
        page = await open_page(browser)
        await page.goto(bare_system.http_url + "/")
        await expect(page.locator("#connection")).to_have_text("Connected")
        for n, message in enumerate(("hello", "hello again")):
            await send(page, message)
            turn = page.locator(".turn").nth(n)
            failure = turn.locator(".failure")
            await expect(failure).to_be_visible()
            await expect(failure).to_contain_text(no_model_message())
            await expect(turn.locator(".status")).to_have_text("Failed")
            await expect(turn.locator(".assistant")).to_have_attribute("aria-busy", "false")
            shown = await turn.inner_text()
            assert "[object Object]" not in shown and "{" not in shown, shown
            # Usable again: the message box and Send take the next message.
            await expect(page.get_by_label("Message", exact=True)).to_be_enabled()
            await expect(page.get_by_label("Message", exact=True)).to_be_editable()
            await expect(page.get_by_role("button", name="Send", exact=True)).to_be_enabled()
        await page.screenshot(path=shot("page-no-model.png"), full_page=True)


async def test_the_page_keeps_an_ended_request_ended_when_its_ack_comes_late(
    bare_system: System,
) -> None:
    # A proxy in front of the page holds each ack until the request's end has passed it: the
    # page once marked the request as working again when its ack came, and stayed "Working…".
    def late_acks(ws: WebSocketRoute) -> None:
        server = ws.connect_to_server()
        held: dict[str, str] = {}

        def to_page(message: str | bytes) -> None:
            frame = json.loads(message)
            request_id = frame.get("request_id", "")
            if frame.get("event") == "ack":
                held[request_id] = str(message)
                return
            ws.send(message)
            if "on_chat_model_end" in frame and request_id in held:
                ws.send(held.pop(request_id))

        server.on_message(to_page)
        ws.on_message(server.send)

    async with chromium() as browser:
        page = await open_page(browser)
        await page.route_web_socket("**/ws", late_acks)
        await page.goto(bare_system.http_url + "/")
        await expect(page.locator("#connection")).to_have_text("Connected")
        await send(page, "hello")
        turn = page.locator(".turn").nth(0)
        await expect(turn.locator(".failure")).to_contain_text(no_model_message())
        await expect(turn.locator(".status")).to_have_text("Failed")
        await expect(turn.locator(".assistant")).to_have_attribute("aria-busy", "false")
        await expect(turn.locator(".cancel")).to_be_hidden()
