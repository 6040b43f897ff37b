"""The browser tools as the TOOLS worker calls them, for the tests that drive real Chromium
(tests/workers/): one task's run, its tools called by name with JSON arguments."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from services.workers.tools.browser import Browser
from services.workers.tools.hosts import Hosts
from services.workers.tools.toolbox import Call, RunContext, ToolBox


class Task:
    """One task's run of the browser tools; `hosts`: the hosts it has opened, and the policy's
    ruling on a new one (as the approval gate keeps them)."""

    def __init__(self, browser: Browser, request_id: str, hosts: Hosts | None = None) -> None:
        self.box = ToolBox(browser.tools(), result_chars=5000, call_timeout=60)
        self.hosts = hosts or Hosts()
        self.run = RunContext(request_id=request_id, session_id="s", attempt=1, hosts=self.hosts)

    async def call(self, name: str, **args: object) -> tuple[str, bool]:
        """The tool's result, and whether it succeeded."""
        outcome = await self.box.call(name, json.dumps(args), Call(self.run, f"call_{name}"))
        return outcome.content, outcome.ok


@asynccontextmanager
async def task(
    browser: Browser, request_id: str, hosts: Hosts | None = None
) -> AsyncIterator[Task]:
    """A task's run, closed (its browser context with it) when the block ends."""
    t = Task(browser, request_id, hosts)
    try:
        yield t
    finally:
        await t.run.close()
