"""A client's A2A push-notification webhook, played by a local server."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from tests.support.fakes.http import FakeServer, Recorded, Response

HOOK = "/hook"


class Webhook(FakeServer):
    """A client's webhook: keeps each POST with the status it answered (503 to the first
    `failing` ones, 200 to the rest)."""

    def __init__(self) -> None:
        super().__init__()
        self.failing = 0
        self.answered: list[tuple[Recorded, int]] = []
        self.came = threading.Condition()
        self.route("POST", HOOK, self._take)

    def _take(self, rec: Recorded) -> Response:
        with self.came:
            status = 503 if self.failing > 0 else 200
            self.failing -= status == 503
            self.answered.append((rec, status))
            self.came.notify_all()
        return Response(status, {})

    async def until(self, check: Callable[[], bool], timeout: float = 60.0) -> None:
        """Wait for a POST after which `check` holds (they come from another process)."""

        def wait() -> bool:
            with self.came:
                return self.came.wait_for(check, timeout)

        assert await asyncio.to_thread(wait), "the webhook was not told in time"

    def posts(self, task_id: str, status: int | None = None) -> list[Recorded]:
        """The POSTs about `task_id` (answered `status`, if given), in the order they came."""
        with self.came:
            return [
                r
                for r, answered in list(self.answered)
                if task_of(r.json()) == task_id and status in (None, answered)
            ]


def task_of(body: dict[str, Any]) -> str:
    return str(body["task"]["id"] if "task" in body else body["statusUpdate"]["taskId"])
