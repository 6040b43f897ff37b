"""The browser's side of `browser.new_domain`: under `ask` or `deny`, no main-frame navigation
reaches a host not opened in this run (tools/hosts.py), however the page starts it.

`browser_navigate` is ruled on before it runs (the approval gate); a page can also leave by a
link, a form, a script (`location = ...`), a meta refresh or an HTTP redirect. Playwright's
`route` sees only the first request of a navigation (a redirect's next hop is continued without
asking it), so the check sits lower: a DevTools session on the task's page pauses every
document request of its main frame, each redirect hop included, before it is sent, and fails
the request (`Aborted`: the page stays where it was) when its host may not be opened. Nothing
is sent to that host, not even through the proxy. A pop-up window is a page of its own, with
no such session, so its navigation is stopped too (through the context's `route`, which
Playwright arms before a new page runs): the tools read only the task's one page.

Subframes (iframes) and subresources (images, scripts, styles, fetch/XHR) are not navigations
of the page: they stay under the egress wall only (tools/proxy.py). Under `allow` none of this
is armed: each host the page lands on is counted as opened.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from playwright.async_api import BrowserContext, CDPSession, Frame, Page, Request, Route
from playwright.async_api import Error as PlaywrightError

from services.workers.tools.hosts import Blocked, Hosts, Via, host_of

log = logging.getLogger("sidekick.workers.tools.browser")

DOCUMENTS = {"urlPattern": "*", "resourceType": "Document", "requestStage": "Request"}


class NavigationGate:
    """One task's check of its page's navigations; `blocked` lists what it stopped, newest
    last."""

    def __init__(self, hosts: Hosts, request_id: str = "") -> None:
        self.hosts = hosts
        self.request_id = request_id
        self.blocked: list[Blocked] = []
        self._page: Page | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def arm(self, context: BrowserContext, page: Page) -> None:
        """Check `page`'s main-frame navigations, and stop every other page's (pop-ups)."""
        self._page = page
        if not self.hosts.gated:  # nothing to stop: each host the page reaches counts opened
            page.on("framenavigated", self._opened)
            return
        session = await context.new_cdp_session(page)
        tree = await session.send("Page.getFrameTree")
        main = str(tree["frameTree"]["frame"]["id"])
        session.on("Fetch.requestPaused", lambda event: self._spawn(session, main, event))
        await session.send("Fetch.enable", {"patterns": [DOCUMENTS]})
        await context.route("**/*", self._route)

    def _opened(self, frame: Frame) -> None:
        if frame.parent_frame is None:
            self.hosts.check(frame.url, "page")

    def since(self, seen: int) -> list[Blocked]:
        return list(dict.fromkeys(self.blocked[seen:]))

    def _spawn(self, session: CDPSession, main: str, event: dict[str, Any]) -> None:
        task = asyncio.get_running_loop().create_task(self._paused(session, main, event))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _paused(self, session: CDPSession, main: str, event: dict[str, Any]) -> None:
        request_id = event["requestId"]
        blocked = None
        # A request without a frame is checked as the main frame's: fail closed.
        if event.get("frameId", main) == main:
            via: Via = "redirect" if event.get("redirectedRequestId") else "page"
            blocked = self.hosts.check(str(event["request"]["url"]), via)
        try:
            if blocked is None:
                await session.send("Fetch.continueRequest", {"requestId": request_id})
                return
            self.blocked.append(blocked)
            log.info(
                "browser: stopped a navigation to %s (%s) of %s",
                blocked.host,
                blocked.via,
                self.request_id,
            )
            await session.send(
                "Fetch.failRequest", {"requestId": request_id, "errorReason": "Aborted"}
            )
        except PlaywrightError:
            pass  # the page (or the request) is gone: nothing left to let through

    async def _route(self, route: Route) -> None:
        request = route.request
        if request.is_navigation_request() and not self._ours(request):
            url = request.url
            self.blocked.append(Blocked(url, host_of(url) or url, "popup", self.hosts.ruling))
            await route.abort("aborted")
            return
        await route.fallback()

    def _ours(self, request: Request) -> bool:
        """Whether the navigation is of the task's page (a pop-up's first one has no frame)."""
        try:
            return request.frame.page is self._page
        except PlaywrightError:
            return False

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
