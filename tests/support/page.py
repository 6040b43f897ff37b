"""Driving the web page with Debian's Chromium through Playwright: launch, sign in, send."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from playwright.async_api import Browser, Page, async_playwright, expect

from services.workers.tools.browser import HEADLESS_ARGS
from tests.support.gateway_client import token
from tests.support.harness import ROOT, System

ARTIFACTS = ROOT / "tests" / "artifacts"
DESKTOP = {"width": 1100, "height": 900}
# A shared 2-core machine: an orchestrated answer can take longer than expect()'s 5 s.
expect.set_options(timeout=30_000)
PHONE = {"width": 390, "height": 844}


@asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path="/usr/bin/chromium", headless=True, args=list(HEADLESS_ARGS)
        )
        try:
            yield browser
        finally:
            await browser.close()


async def open_page(browser: Browser, viewport: dict[str, int] = DESKTOP, **context: Any) -> Page:
    ctx = await browser.new_context(viewport=viewport, **context)  # type: ignore[arg-type]
    page = await ctx.new_page()
    page.set_default_timeout(30_000)
    return page


async def sign_in(page: Page, system: System, principal: str) -> None:
    await page.goto(system.http_url + "/")
    await expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    await page.get_by_label("Access token").fill(token(principal))
    await page.get_by_label("Access token").press("Enter")
    await expect(page.locator("#connection")).to_have_text("Connected")


async def send(page: Page, message: str, criteria: str = "") -> None:
    await page.get_by_label("Message", exact=True).fill(message)
    await page.get_by_label("Success criteria").fill(criteria)
    await page.get_by_role("button", name="Send", exact=True).click()


def shot(name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / name
