"""browser_*: Playwright driving headless Chromium (Debian's, via `executable_path`; this
project never downloads a browser of its own).

One Chromium per worker process, started on first use and restarted if it dies; each task gets
a fresh context (its own in-memory profile: no cookies, storage or cache shared between requests
or users), deleted when the task ends. Every request the context makes (navigations, redirects,
subresources, the page's own fetch/XHR/WebSocket, loopback included) goes through the task's
own filtering proxy (proxy.py), so nothing a page or the model chooses reaches a loopback,
private or metadata address. Only http(s) pages can be opened: `file:` and the browser's own
schemes would read the worker's disk. Service workers are blocked; WebRTC may not use UDP
outside the proxy. Under the operator's `browser.new_domain` rule `ask` or `deny`, no
navigation of the page (a click, a form, a script, a redirect, a pop-up) reaches a host not
opened in the run (navgate.py); the tool's result says what was stopped and what to do.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from urllib.parse import urlsplit

from playwright.async_api import Browser as PWBrowser
from playwright.async_api import BrowserContext, Page, Playwright, async_playwright
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeout
from pydantic import Field

from contracts import Source
from services.runtime.walls.egress import Egress, EgressRefused
from services.workers.tools.errors import ToolError, ToolNotConfigured, ToolUnavailable
from services.workers.tools.navgate import NavigationGate
from services.workers.tools.proxy import PROXY_HEADER, FilteringProxy
from services.workers.tools.toolbox import Args, Call, RunContext, Toolset, tool

log = logging.getLogger("sidekick.workers.tools.browser")

# Headless Chromium that starts quietly: no GPU, no first-run page, no calls home.
HEADLESS_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
LAUNCH_ARGS = (
    *HEADLESS_ARGS,
    # WebRTC could otherwise send UDP around the proxy.
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
)
# Contexts bring their own proxy; Chromium needs one set at launch for that to work, and this
# one is never used. `<-loopback>`: loopback goes through the proxy too (Chromium's default
# would bypass it).
LAUNCH_PROXY = {"server": "http://per-context"}
NO_BYPASS = "<-loopback>"
MAX_LINKS = 200

_LINKS_JS = """els => els.map(e => ({text: (e.innerText || e.title || '').trim(), href: e.href}))"""


def _first_line(exc: PlaywrightError) -> str:
    return (exc.message or str(exc)).strip().splitlines()[0] if str(exc) else repr(exc)


def _is_file(path: str) -> bool:
    return Path(path).is_file()


class NavigateArgs(Args):
    url: str = Field(min_length=1, description="An http:// or https:// address.")


class TextArgs(Args):
    max_chars: int = Field(default=8000, ge=200, le=100_000, description="Characters to return.")


class ClickArgs(Args):
    selector: str | None = Field(default=None, description="A CSS selector of what to click.")
    text: str | None = Field(default=None, description="Or: the visible text of what to click.")


class LinksArgs(Args):
    limit: int = Field(default=50, ge=1, le=MAX_LINKS, description="How many links at most.")


class Browser(Toolset):
    """The process's Chromium. `close()` at shutdown."""

    def __init__(
        self,
        executable: str,
        *,
        timeout: float,
        egress: Egress,
        screenshot_dir: Path | None = None,
    ) -> None:
        self.executable = executable
        self.egress = egress
        self.timeout_ms = timeout * 1000
        self.screenshot_dir = screenshot_dir
        self._pw: Playwright | None = None
        self._browser: PWBrowser | None = None
        self._lock = asyncio.Lock()
        self._sessions: dict[int, BrowserSession] = {}

    async def browser(self) -> PWBrowser:
        async with self._lock:
            if self._browser is not None and self._browser.is_connected():
                return self._browser
            if not _is_file(self.executable):
                raise ToolNotConfigured(
                    "browser",
                    f"Chromium was not found at {self.executable}; install it "
                    "(apt-get install chromium) or set SIDEKICK_CHROMIUM_PATH.",
                )
            if self._pw is None:
                self._pw = await async_playwright().start()
            try:
                self._browser = await self._pw.chromium.launch(
                    executable_path=self.executable,
                    headless=True,
                    args=list(LAUNCH_ARGS),
                    proxy=LAUNCH_PROXY,  # type: ignore[arg-type]
                    timeout=60_000,
                )
            except PlaywrightError as exc:
                raise ToolUnavailable(
                    f"Chromium at {self.executable} could not be started: {_first_line(exc)}"
                ) from exc
            log.info("started Chromium %s", self._browser.version)
            return self._browser

    def session(self, run: RunContext) -> BrowserSession:
        """The task's browsing session; its context is closed when the task ends."""
        key = id(run)
        session = self._sessions.get(key)
        if session is None:
            session = BrowserSession(self, run)
            self._sessions[key] = session

            async def close() -> None:
                self._sessions.pop(key, None)
                await session.close()

            run.on_close(close)
        return session

    async def close(self) -> None:
        for session in list(self._sessions.values()):
            await session.close()
        if self._browser is not None:
            with contextlib.suppress(PlaywrightError):
                await self._browser.close()
        if self._pw is not None:
            await self._pw.stop()
        self._browser = self._pw = None

    # Tools: each finds the task's session and acts on its one page.

    @tool(
        "browser_navigate",
        "Open a web page in a headless browser (JavaScript runs); returns its title.",
    )
    async def navigate(self, args: NavigateArgs, call: Call) -> str:
        return await self.session(call.run).navigate(args.url)

    @tool("browser_text", "The visible text of the page currently open in the browser.")
    async def text(self, args: TextArgs, call: Call) -> str:
        return await self.session(call.run).text(args.max_chars)

    @tool(
        "browser_click", "Click a link or button on the open page, by CSS selector or visible text."
    )
    async def click(self, args: ClickArgs, call: Call) -> str:
        return await self.session(call.run).click(args.selector, args.text)

    @tool("browser_links", "The links on the open page: their text and absolute addresses.")
    async def links(self, args: LinksArgs, call: Call) -> str:
        return await self.session(call.run).links(args.limit)


class BrowserSession:
    """One task's context and page."""

    def __init__(self, owner: Browser, run: RunContext) -> None:
        self.owner = owner
        self.run = run
        self._context: BrowserContext | None = None
        self._proxy: FilteringProxy | None = None
        self._page: Page | None = None
        self._gate = NavigationGate(run.hosts, run.request_id)
        self._told = 0  # how many of the gate's stopped navigations the model was told of
        self._shots = 0

    async def _open_page(self) -> Page:
        if self._page is None or self._page.is_closed():
            browser = await self.owner.browser()
            if self._context is None:
                self._proxy = FilteringProxy(self.owner.egress, self.run.request_id)
                server = await self._proxy.start()
                self._context = await browser.new_context(
                    accept_downloads=False,
                    service_workers="block",
                    proxy={"server": server, "bypass": NO_BYPASS},
                )
                self._context.set_default_timeout(self.owner.timeout_ms)
            page = await self._context.new_page()
            await self._gate.arm(self._context, page)
            self._page = page
        return self._page

    def _refused_since(self, seen: int) -> str:
        """What the proxy refused during the last action, for the model to read."""
        if self._proxy is None or len(self._proxy.refusals) <= seen:
            return ""
        new = list(dict.fromkeys(self._proxy.refusals[seen:]))
        shown = "\n".join(f"- refused: {r}" for r in new[:5])
        more = f"\n- ... and {len(new) - 5} more" if len(new) > 5 else ""
        return f"\nRequests the egress check refused (not public addresses):\n{shown}{more}"

    @property
    def _refusal_count(self) -> int:
        return len(self._proxy.refusals) if self._proxy is not None else 0

    def _stopped(self) -> str:
        """The navigations stopped (to a host not opened) that the model was not yet told of,
        one per line; empty when there are none."""
        fresh = self._gate.blocked[self._told :]
        self._told = len(self._gate.blocked)
        return "\n".join(dict.fromkeys(b.text() for b in fresh))

    def _notes(self, seen: int | None = None) -> str:
        """After a result: what was stopped since the model was last told, and (from `seen`)
        what the proxy refused."""
        stopped = self._stopped()
        refused = self._refused_since(seen) if seen is not None else ""
        return (f"\n\n{stopped}" if stopped else "") + refused

    def _current(self) -> Page:
        if self._page is None or self._page.is_closed() or self._page.url == "about:blank":
            raise ToolError("no page is open; call browser_navigate first.")
        return self._page

    async def _describe(self, page: Page, status: int | None = None) -> str:
        title = await page.title()
        self.run.add_source(Source(title=title or page.url, url=page.url))
        await self._screenshot(page)
        head = f"Opened {page.url}"
        if status is not None:
            head += f" (HTTP {status})"
        return f"{head}\nTitle: {title or '(none)'}"

    async def _screenshot(self, page: Page) -> None:
        if self.owner.screenshot_dir is None:
            return
        self._shots += 1
        path = self.owner.screenshot_dir / f"{self.run.request_id}-{self._shots:02d}.png"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            await page.screenshot(path=str(path), full_page=True)
        except (OSError, PlaywrightError):
            log.warning("could not save a screenshot to %s", path, exc_info=True)

    async def navigate(self, url: str) -> str:
        try:
            await self.owner.egress.check_url(url, source="browser")
        except EgressRefused as exc:
            raise ToolError(f"refused: {exc.reason}.") from exc
        except OSError as exc:
            raise ToolError(f"could not open {url}: {exc}") from exc
        page = await self._open_page()
        seen = self._refusal_count
        try:
            response = await page.goto(url.strip(), wait_until="domcontentloaded")
        except PlaywrightError as exc:
            refused = self._refused_since(seen)
            stopped = self._stopped()  # a redirect to a host not opened
            if stopped:
                raise ToolError(f"{stopped}{refused}") from exc
            raise ToolError(f"could not open {url}: {_first_line(exc)}{refused}") from exc
        if response is not None and response.headers.get(PROXY_HEADER.lower()):
            # The proxy answered, not the site: the page (or a redirect) was refused or is down.
            said = (await response.text()).strip()
            raise ToolError(f"could not open {url}: {said}{self._refused_since(seen)}")
        with contextlib.suppress(PlaywrightTimeout):
            await page.wait_for_load_state("load", timeout=min(self.owner.timeout_ms, 5000))
        described = await self._describe(page, response.status if response else None)
        return described + self._notes(seen)

    async def text(self, max_chars: int) -> str:
        page = self._current()
        try:
            text = await page.evaluate("() => document.body ? document.body.innerText : ''")
        except PlaywrightError as exc:
            raise ToolError(f"could not read the page: {_first_line(exc)}") from exc
        lines = [line.strip() for line in str(text).splitlines()]
        body = "\n".join(line for line in lines if line)
        if len(body) > max_chars:
            body = body[:max_chars] + f"\n[... {len(body) - max_chars} more characters]"
        shown = f"Page {page.url}\nTitle: {await page.title()}\n\n{body or '(no visible text)'}"
        return shown + self._notes()

    async def click(self, selector: str | None, text: str | None) -> str:
        page = self._current()
        if not (selector or text):
            raise ToolError("give a selector or the text of what to click.")
        target = page.locator(selector) if selector else page.get_by_text(text or "")
        seen = self._refusal_count
        try:
            # Something to click is there at once or soon; do not wait the page timeout.
            await target.first.click(timeout=min(self.owner.timeout_ms, 5000))
        except PlaywrightTimeout as exc:
            raise ToolError(f"nothing clickable matched {selector or text!r}.") from exc
        except PlaywrightError as exc:
            raise ToolError(f"the click failed: {_first_line(exc)}") from exc
        with contextlib.suppress(PlaywrightTimeout):
            await page.wait_for_load_state("load", timeout=min(self.owner.timeout_ms, 5000))
        stopped = self._stopped()
        if stopped:  # what the click led to was not opened
            raise ToolError(f"{stopped}\nThe page is still {page.url}.{self._refused_since(seen)}")
        return await self._describe(page) + self._refused_since(seen)

    async def links(self, limit: int) -> str:
        page = self._current()
        try:
            found = await page.eval_on_selector_all("a[href]", _LINKS_JS)
        except PlaywrightError as exc:
            raise ToolError(f"could not read the links: {_first_line(exc)}") from exc
        seen: set[str] = set()
        lines = []
        for link in found:
            href = str(link.get("href") or "")
            if urlsplit(href).scheme not in ("http", "https") or href in seen:
                continue
            seen.add(href)
            lines.append(
                f"- {' '.join(str(link.get('text') or '').split()) or '(no text)'}: {href}"
            )
            if len(lines) >= limit:
                break
        if not lines:
            return f"The page {page.url} has no links." + self._notes()
        return f"Links on {page.url}:\n" + "\n".join(lines) + self._notes()

    async def close(self) -> None:
        context, self._context, self._page = self._context, None, None
        proxy, self._proxy = self._proxy, None
        await self._gate.close()
        if context is not None:
            with contextlib.suppress(PlaywrightError):
                await context.close()  # the profile (cookies, storage, cache) goes with it
        if proxy is not None:
            await proxy.close()
