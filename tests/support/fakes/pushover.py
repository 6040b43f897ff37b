"""A fake Pushover API: `POST /1/messages.json` with a form (token, user, message, title...),
and `POST /1/users/validate.json` (token, user), which checks the keys and sends nothing.

Answers as Pushover does: 200 `{"status": 1, "request": "<uuid>"}` with the X-Limit-App-*
headers; 400 `{"<field>": "invalid", "errors": [...], "status": 0, "request": "<uuid>"}` for a
wrong token or user key or a blank message. Accepted messages are kept in `messages`."""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import parse_qs

from tests.support.fakes.http import FakeServer, Recorded, Response

MESSAGES = "/1/messages.json"
VALIDATE = "/1/users/validate.json"


class FakePushover(FakeServer):
    def __init__(self, token: str = "pushover-app-token", user: str = "pushover-user-key") -> None:
        super().__init__()
        self.token = token
        self.user = user
        self.messages: list[dict[str, str]] = []
        self.route("POST", MESSAGES, self._message)
        self.route("POST", VALIDATE, self._validate)

    def reset(self) -> None:
        super().reset()
        with self._lock:
            self.messages.clear()

    def env(self) -> dict[str, str]:
        """What the tools worker is given to push through this fake."""
        return {
            "PUSHOVER_TOKEN": self.token,
            "PUSHOVER_USER": self.user,
            "SIDEKICK_PUSHOVER_BASE_URL": self.url,
        }

    def sent(self, message: str) -> int:
        """How many times `message` was pushed."""
        return len([m for m in self.messages if m["message"] == message])

    def _validate(self, rec: Recorded) -> Response:
        form = {k: v[0] for k, v in parse_qs(rec.body.decode()).items()}
        request = str(uuid.uuid4())
        if form.get("token") != self.token:
            body = {"token": "invalid", "errors": ["application token is invalid"]}
        elif form.get("user") != self.user:
            body = {"user": "invalid", "errors": ["user key is invalid"]}
        else:
            return Response(
                200, {"status": 1, "group": 0, "devices": ["phone"], "request": request}
            )
        return Response(400, {**body, "status": 0, "request": request})

    def _message(self, rec: Recorded) -> Response:
        self.gate()
        form = {k: v[0] for k, v in parse_qs(rec.body.decode()).items()}
        request = str(uuid.uuid4())
        errors: dict[str, Any] = {}
        if form.get("token") != self.token:
            errors["token"] = (
                "invalid",
                "application token is invalid, see https://pushover.net/api",
            )
        elif form.get("user") != self.user:
            errors["user"] = (
                "invalid",
                "user identifier is not a valid user, group, or subscribed user key, see https://pushover.net/api#identifiers",
            )
        elif not form.get("message"):
            errors["message"] = ("cannot be blank", "message cannot be blank")
        if errors:
            body: dict[str, Any] = {k: v[0] for k, v in errors.items()}
            body.update(
                {"errors": [v[1] for v in errors.values()], "status": 0, "request": request}
            )
            return Response(400, body)
        with self._lock:
            self.messages.append(form)
        return Response(
            200,
            {"status": 1, "request": request},
            {
                "X-Limit-App-Limit": "10000",
                "X-Limit-App-Remaining": str(10000 - len(self.messages)),
                "X-Limit-App-Reset": "1893456000",
            },
        )
