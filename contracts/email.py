"""The EMAIL worker's wire types: the model's draft, and what the local outbox keeps."""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, Field

from contracts.base import Model, utcnow


class EmailDraft(Model):
    """The model's draft of an email from the task's notes."""

    subject: str = Field(description="A short subject line.")
    body: str = Field(description="The plain-text body, ready to send, with greeting and sign-off.")


class OutboxEntry(Model):
    """An email kept in the local outbox because no SendGrid key is set: it was NOT sent."""

    kind: Literal["email.outboxed"] = "email.outboxed"
    request_id: str = Field(description="The request that wrote the email.")
    session_id: str = Field(description="The conversation it came from.")
    attempt: int = Field(ge=1, description="Attempt number of the request.")
    sent: Literal[False] = Field(default=False, description="Always false: outbox mail is unsent.")
    status: Literal["not_sent"] = Field(
        default="not_sent", description="Always 'not_sent': set SENDGRID_API_KEY to send mail."
    )
    to: list[str] = Field(description="Recipient addresses.")
    from_email: str | None = Field(default=None, description="Sender address, if configured.")
    subject: str = Field(description="Subject line.")
    body: str = Field(description="Plain-text body.")
    created_at: AwareDatetime = Field(default_factory=utcnow, description="When it was written.")
