"""Every tool, bound to the clients it uses. The clients are made once per worker process.

Only web_search, wikipedia_* and browser_* read outside data; python_run runs in bubblewrap with
no network, in the session's folder, which files_* share; notify only sends.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from nats.js.kv import KeyValue
from pydantic import Field

from services.runtime.budgets.quota import MiB, Quota
from services.runtime.walls.egress import Egress
from services.workers.tools import reachable
from services.workers.tools.browser import Browser
from services.workers.tools.bwrap import Limits
from services.workers.tools.files import Files
from services.workers.tools.notify import Notifier
from services.workers.tools.python_sandbox import PythonSandbox
from services.workers.tools.settings import ToolsSettings
from services.workers.tools.toolbox import Args, Call, Tool, tool, tools_of
from services.workers.tools.websearch import WebSearch
from services.workers.tools.wikipedia import Wikipedia

USER_AGENT = "Sidekick/0.1 (multi-agent assistant; tools worker)"


class PythonArgs(Args):
    code: str = Field(min_length=1, description="A complete Python 3 program; print results.")


def files_root(settings: ToolsSettings, data_dir: Path) -> Path:
    """The configured folder, or `<data dir>/files` (as root, one the sandbox can reach)."""
    return settings.files_root or reachable.files_folder(data_dir / "files")


def python_sandbox(settings: ToolsSettings, data_dir: Path) -> PythonSandbox:
    """python_run's sandbox as configured (the tools worker's, and what `sidekick doctor` asks)."""
    limits = Limits(
        cpu_seconds=settings.python_cpu_seconds,
        memory_bytes=settings.python_memory_mb * 1024 * 1024,
        wall_seconds=settings.python_wall_seconds,
        output_chars=settings.python_output_chars,
        processes=settings.python_processes,
    )
    return PythonSandbox(
        limits,
        files_root(settings, data_dir),
        python=settings.python_executable,
        bwrap=settings.bwrap,
        quota=folder_quota(settings),
    )


def folder_quota(settings: ToolsSettings) -> Quota:
    return Quota(bytes=settings.files_quota_mb * MiB, entries=settings.files_quota_entries)


@dataclass
class Clients:
    http: httpx.AsyncClient
    browser: Browser
    python: PythonSandbox
    files: Files
    wikipedia: Wikipedia
    web: WebSearch
    notifier: Notifier

    @classmethod
    def create(
        cls,
        settings: ToolsSettings,
        *,
        data_dir: Path,
        ledger: Callable[[], KeyValue],
        egress: Egress,
    ) -> Clients:
        http = httpx.AsyncClient(
            timeout=settings.http_timeout,
            headers={"User-Agent": USER_AGENT},
            follow_redirects=True,
        )
        return cls(
            http=http,
            browser=Browser(
                settings.chromium_path,
                timeout=settings.browser_timeout,
                egress=egress,
                screenshot_dir=settings.browser_screenshot_dir,
            ),
            python=python_sandbox(settings, data_dir),
            files=Files(
                files_root(settings, data_dir),
                max_bytes=settings.files_max_bytes,
                quota=folder_quota(settings),
            ),
            wikipedia=Wikipedia(http, settings.wikipedia_base_url),
            web=WebSearch(http, api_key=settings.brave_api_key, base_url=settings.brave_base_url),
            notifier=Notifier(
                http,
                ledger,
                token=settings.pushover_token,
                user=settings.pushover_user,
                base_url=settings.pushover_base_url,
            ),
        )

    @tool(
        "python_run",
        "Run a Python 3 program (standard library only) in a sandbox: no network, limited "
        "CPU time, memory and processes; its working folder is the user's files folder "
        "(the files_* tools see the same files). Returns its stdout, stderr and exit status.",
    )
    async def python_run(self, args: PythonArgs, call: Call) -> str:
        result = await self.python.run(args.code, call.run.session_id)
        return result.render()

    def tools(self) -> list[Tool[Any]]:
        return [
            *self.browser.tools(),
            *tools_of(self),
            *self.files.tools(),
            *self.wikipedia.tools(),
            *self.web.tools(),
            *self.notifier.tools(),
        ]

    async def close(self) -> None:
        await self.browser.close()
        await self.http.aclose()
