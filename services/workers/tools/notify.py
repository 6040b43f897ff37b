"""notify: a Pushover push (`POST {base}/1/messages.json` with token, user, message), sent at
most once per tool call.

Before sending, a ledger entry keyed by (request, attempt, tool call id) is created in the KV
bucket `<ns>_ledger` with create-if-absent; only the creator sends. A task delivered twice (a
worker killed mid-task, an ack that timed out) replays the same call ids, finds the entry and
reports the first outcome instead of pushing again. A send whose outcome is unknown (the worker
died between creating the entry and recording the answer) is not repeated: at most once.

A model re-run from the start may give the same call a new id, so a second entry keyed by the
notification's text within (request, attempt) is claimed too: the same message is not pushed
twice in one attempt whatever its call id.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import nats.errors
import nats.js.errors
from nats.js.kv import KeyValue
from pydantic import Field

from services.runtime.bus.kvstore import key_for
from services.workers.tools.errors import ToolError, ToolNotConfigured, ToolUnavailable
from services.workers.tools.toolbox import Args, Call, Toolset, tool

MESSAGES_PATH = "/1/messages.json"


class NotifyArgs(Args):
    message: str = Field(min_length=1, max_length=1024, description="The notification text.")
    title: str | None = Field(default=None, max_length=250, description="Optional title.")


def ledger_key(request_id: str, attempt: int, call_id: str) -> str:
    return "notify." + key_for(f"{request_id}:{attempt}:{call_id}")


def text_key(request_id: str, attempt: int, args: NotifyArgs) -> str:
    return "notify_text." + key_for(f"{request_id}:{attempt}:{args.title}:{args.message}")


class Notifier(Toolset):
    def __init__(
        self,
        http: httpx.AsyncClient,
        ledger: Callable[[], KeyValue],
        *,
        token: str | None,
        user: str | None,
        base_url: str,
    ) -> None:
        self.http = http
        self.ledger = ledger
        self.token = token or None
        self.user = user or None
        self.base_url = base_url.rstrip("/")

    @tool("notify", "Send the user a push notification (Pushover).")
    async def notify(self, args: NotifyArgs, call: Call) -> str:
        if not (self.token and self.user):
            raise ToolNotConfigured(
                "notify", "set PUSHOVER_TOKEN and PUSHOVER_USER to send push notifications."
            )
        run = call.run
        key = ledger_key(run.request_id, run.attempt, call.call_id)
        ledger = self.ledger()
        if not await self._claim(ledger, key, {"state": "sending"}):
            return await self._already(ledger, key)
        if not await self._claim(ledger, text_key(run.request_id, run.attempt, args), {}):
            await ledger.put(key, json.dumps({"state": "duplicate"}).encode())
            return await self._already(ledger, key)
        try:
            receipt = await self._send(args)
        except ToolError as exc:
            await ledger.put(key, json.dumps({"state": "failed", "error": str(exc)}).encode())
            raise
        await ledger.put(key, json.dumps({"state": "sent", "receipt": receipt}).encode())
        return f"Notification sent (Pushover request {receipt})."

    async def _claim(self, ledger: KeyValue, key: str, value: dict[str, str]) -> bool:
        """Create `key`; False if it already exists."""
        try:
            await ledger.create(key, json.dumps(value).encode())
        except nats.js.errors.KeyWrongLastSequenceError:
            return False
        except nats.errors.Error as exc:
            raise ToolUnavailable(f"the idempotency ledger could not be written: {exc!r}.") from exc
        return True

    async def _send(self, args: NotifyArgs) -> str:
        form = {"token": self.token or "", "user": self.user or "", "message": args.message}
        if args.title:
            form["title"] = args.title
        try:
            resp = await self.http.post(self.base_url + MESSAGES_PATH, data=form)
        except httpx.HTTPError as exc:
            raise ToolUnavailable(f"Pushover could not be reached: {exc!r}.") from exc
        try:
            body = resp.json()
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        if resp.status_code >= 500 or resp.status_code == 429:
            raise ToolUnavailable(f"Pushover is unavailable (HTTP {resp.status_code}).")
        if resp.status_code >= 400 or body.get("status") != 1:
            errors = body.get("errors") or [f"HTTP {resp.status_code}"]
            raise ToolError(f"Pushover refused the notification: {'; '.join(map(str, errors))}.")
        return str(body.get("request") or "")

    async def _already(self, ledger: KeyValue, key: str) -> str:
        try:
            entry = await ledger.get(key)
            state = json.loads(entry.value or b"{}")
        except (nats.js.errors.KeyNotFoundError, ValueError):
            state = {}
        if state.get("state") == "sent":
            return (
                f"Notification already sent for this call (Pushover request "
                f"{state.get('receipt')}); not sent again."
            )
        if state.get("state") == "duplicate":
            return "The same notification was already sent in this attempt; not sent again."
        if state.get("state") == "failed":
            raise ToolError(f"this notification already failed: {state.get('error')}")
        return (
            "A send of this notification was already started and its outcome is unknown; it "
            "is not sent again, to avoid a duplicate."
        )
