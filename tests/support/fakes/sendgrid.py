"""A fake SendGrid v3 API: `POST /v3/mail/send` with `Authorization: Bearer <key>` answers 202
with an empty body and an `X-Message-Id` header, like SendGrid; a wrong key gets 401 and a body
missing required fields gets 400, in SendGrid's `{"errors": [...]}` shape."""

from __future__ import annotations

from typing import Any

from tests.support.fakes.http import FakeServer, Recorded, Response

SEND = "/v3/mail/send"
SENDER = "sidekick@example.com"


def _errors(message: str, field: str | None = None) -> dict[str, Any]:
    return {"errors": [{"message": message, "field": field, "help": None}]}


class FakeSendGrid(FakeServer):
    def __init__(self, key: str = "SG.test-key") -> None:
        super().__init__()
        self.key = key
        self.failure: Response | None = None
        self.route("POST", SEND, self._send)

    def reset(self) -> None:
        super().reset()
        self.failure = None

    def env(self) -> dict[str, str]:
        """What the email worker is given to send through this fake, from SENDER."""
        return {
            "SENDGRID_API_KEY": self.key,
            "SENDGRID_FROM_EMAIL": SENDER,
            "SIDEKICK_SENDGRID_BASE_URL": self.url,
        }

    @property
    def mails(self) -> list[dict[str, Any]]:
        """Bodies of every send request, accepted or not."""
        return [r.json() for r in self.calls(SEND)]

    def _send(self, rec: Recorded) -> Response:
        self.gate()
        auth = {k.lower(): v for k, v in rec.headers.items()}.get("authorization")
        if auth != f"Bearer {self.key}":
            return Response(
                401, _errors("The provided authorization grant is invalid, expired, or revoked")
            )
        if self.failure is not None:
            return self.failure
        body = rec.json() or {}
        for field in ("personalizations", "from", "subject", "content"):
            if not body.get(field):
                return Response(400, _errors(f"The {field} field is required.", field))
        n = len(self.calls(SEND))
        return Response(202, b"", {"X-Message-Id": f"fake-message-{n}"})
