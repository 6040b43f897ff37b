"""Errors of the worker kinds that call outside services: `WorkerError`, which carries
`retryable` (may the same attempt succeed if re-run?), and its search and email kinds. The tree
is drawn once, with every other error class, in services/runtime/base/errors.py."""

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
