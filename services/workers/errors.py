"""Errors of the worker kinds that call outside services.

WorkerError                       carries `retryable`: may the same attempt succeed if re-run?
 +-- SearchError                  Brave Search could not give results
 |    +-- SearchNotConfigured     BRAVE_SEARCH_API_KEY is not set (never retryable)
 |    +-- SearchUnavailable       429, 5xx, timeout or network error (retryable)
 |    +-- SearchRejected          any other error status (bad key, bad query; not retryable)
 +-- EmailError                   an email could not be built or sent
      +-- InvalidRecipient        not an address, or a domain that is not allowed
      +-- EmailNotConfigured      a key without SENDGRID_FROM_EMAIL
      +-- EmailSendFailed         SendGrid refused or failed; `retryable` when it surely did not
                                  send (5xx, 429, connection refused)
      +-- EmailOutcomeUnknown     a send may or may not have happened (timeout, a crash mid-send);
                                  never retried, so the mail goes out at most once
"""

from __future__ import annotations

from services.runtime.base.errors import SidekickError


class WorkerError(SidekickError):
    retryable: bool = False

    def __init__(self, message: str, *, retryable: bool | None = None) -> None:
        super().__init__(message)
        if retryable is not None:
            self.retryable = retryable


class SearchError(WorkerError):
    pass


class SearchNotConfigured(SearchError):
    def __init__(self) -> None:
        super().__init__(
            "Web search is not configured: set BRAVE_SEARCH_API_KEY (a Brave Search API "
            "subscription token). No answer was made up without sources.",
            retryable=False,
        )


class SearchUnavailable(SearchError):
    retryable = True


class SearchRejected(SearchError):
    def __init__(self, status: int, detail: str) -> None:
        self.status = status
        super().__init__(f"Brave Search refused the request (HTTP {status}): {detail}")


class EmailError(WorkerError):
    pass


class InvalidRecipient(EmailError):
    def __init__(self, recipient: str, reason: str) -> None:
        self.recipient = recipient
        super().__init__(f"Invalid recipient {recipient!r}: {reason}")


class EmailNotConfigured(EmailError):
    pass


class EmailSendFailed(EmailError):
    pass


class EmailOutcomeUnknown(EmailError):
    pass
