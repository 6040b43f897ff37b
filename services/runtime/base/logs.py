"""Logging for every Sidekick process: one line per record, human-readable by default, or one
JSON object a line with `SIDEKICK_LOG_FORMAT=json` (timestamp, level, service, request_id,
trace_id, logger, message), as log shippers expect.

Every record carries the service that wrote it and, when it was written for a request, that
request's id (bound with `request_context` by whoever handles the request) and the current
trace id. A traceback belongs to a bug: it is printed for ERROR records (and at DEBUG level);
a WARNING about an expected failure (a retry, an unreachable API) gets one line that names the
exception.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from collections.abc import Iterator
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Literal, TypeVar

from opentelemetry import trace

LogFormat = Literal["text", "json"]
T = TypeVar("T")

_REQUEST_ID: ContextVar[str | None] = ContextVar("sidekick_request_id", default=None)
# Libraries that are chatty at INFO (the openai SDK's HTTP client logs every call as `httpx2`).
_NOISY = ("httpx", "httpx2", "openai", "faststream", "nats", "asyncio")


@contextlib.contextmanager
def bound(var: ContextVar[T], value: T) -> Iterator[None]:
    """`var` is `value` inside this block (and in tasks started from it), as it was after."""
    token = var.set(value)
    try:
        yield
    finally:
        var.reset(token)


def request_context(request_id: str | None) -> contextlib.AbstractContextManager[None]:
    """Records written inside this block (and in tasks started from it) name `request_id`."""
    return bound(_REQUEST_ID, request_id)


class _Context(logging.Filter):
    """Adds service, request_id and trace_id to every record that passes a handler."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def filter(self, record: logging.LogRecord) -> bool:
        record.service = self.service
        if getattr(record, "request_id", None) is None:
            record.request_id = _REQUEST_ID.get()
        span = trace.get_current_span().get_span_context()
        record.trace_id = format(span.trace_id, "032x") if span.is_valid else None
        return True


def _exception_line(record: logging.LogRecord) -> str | None:
    if not record.exc_info or record.exc_info[1] is None:
        return None
    exc = record.exc_info[1]
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _wants_traceback(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.ERROR or logging.getLogger().level <= logging.DEBUG


class TextFormatter(logging.Formatter):
    """`2026-01-01 12:00:00,000 frontline    WARNING sidekick.frontline [req 1f2e…]: message`"""

    def __init__(self) -> None:
        super().__init__(
            "%(asctime)s %(service)-12s %(levelname)-7s %(name)s%(where)s: %(message)s"
        )

    def format(self, record: logging.LogRecord) -> str:
        rid = getattr(record, "request_id", None)
        record.where = f" [req {rid}]" if rid else ""
        if record.exc_info and not _wants_traceback(record):
            line = _exception_line(record)
            saved = record.exc_info, record.exc_text
            record.exc_info, record.exc_text = None, None
            try:
                text = super().format(record)
            finally:
                record.exc_info, record.exc_text = saved
            return f"{text} ({line})" if line else text
        return super().format(record)


class JsonFormatter(logging.Formatter):
    """One JSON object a line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "timestamp": datetime.fromtimestamp(record.created, UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "service": getattr(record, "service", None),
            "request_id": getattr(record, "request_id", None),
            "trace_id": getattr(record, "trace_id", None),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info and record.exc_info[1] is not None:
            entry["exception"] = (
                self.formatException(record.exc_info)
                if _wants_traceback(record)
                else _exception_line(record)
            )
        return json.dumps(entry, ensure_ascii=False, default=str)


def log_format() -> LogFormat:
    value = os.environ.get("SIDEKICK_LOG_FORMAT", "text").strip().lower()
    return "json" if value == "json" else "text"


def setup_logging(service: str, *, level: str | None = None, fmt: LogFormat | None = None) -> None:
    """Configure this process's root logger for `service` (replacing any earlier set-up)."""
    level = (level or os.environ.get("SIDEKICK_LOG_LEVEL", "INFO")).upper()
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_Context(service))
    handler.setFormatter(JsonFormatter() if (fmt or log_format()) == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    if root.level > logging.DEBUG:
        for noisy in _NOISY:
            logging.getLogger(noisy).setLevel(logging.WARNING)


def broker_logger(service: str) -> logging.Logger:
    """The logger FastStream writes to for `service`. Its INFO lines are bookkeeping (a consume
    task ended, ...), and it logs every message at DEBUG: shown only at DEBUG level."""
    logger = logging.getLogger(f"sidekick.{service}.broker")
    if logging.getLogger().level > logging.DEBUG:
        logger.setLevel(logging.WARNING)
    return logger
