"""Poison messages (ones that fail validation) said in the log without their content: one line
with the subject, the size, the request id if one can be read, and why it was refused; repeats
within an interval are counted into one summary line (quietlog.py), so a flood of bad
messages cannot fill the disk. The message itself goes to the dead-letter stream, not the log."""

from __future__ import annotations

import logging
import re

from pydantic import ValidationError

from services.runtime.base.quietlog import Summarised

log = logging.getLogger("sidekick.bus")
_said = Summarised(log, "poison messages refused")
_REQUEST_ID = re.compile(rb'"request_id"\s*:\s*"([A-Za-z0-9_.:-]{1,128})"')
SCAN = 4096  # where a request id is looked for: a well-formed event names it early


def why(exc: ValidationError) -> str:
    """What was wrong, by location and error type only (never the input)."""
    first = exc.errors(include_url=False, include_input=False, include_context=False)[0]
    where = ".".join(str(p) for p in first["loc"]) or "message"
    return f"{exc.error_count()} validation error(s), first {where}: {first['type']}"


def request_id_in(data: bytes) -> str | None:
    found = _REQUEST_ID.search(data[:SCAN])
    return found.group(1).decode() if found else None


def refused(subject: str, data: bytes, reason: str, *, kind: str | None = None) -> None:
    """Say that a message on `subject` was refused: the first of its `kind` (by default its
    subject; a subscription's wildcard where subjects carry ids) in an interval."""
    _said.say(
        f"on {kind or subject}",
        "refused a poison message on %s (%d bytes, request %s): %s",
        subject,
        len(data),
        request_id_in(data) or "unknown",
        reason,
    )
