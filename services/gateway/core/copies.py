"""The gateway's copies of the sessions it holds: the latest write of each session's record,
which the server republishes to the session's own subject (services/gateway/core/outbound.py),
with its revision. A copy is the start of a compare-and-set, never the answer to a question:
the write fails if the copy is behind, and the record is read. A copy lives while the session
is held and is dropped when the bus connection was lost since it was made (writes may have
been missed meanwhile)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pydantic import ValidationError

from contracts import SessionRecord
from services.runtime.bus.kvstore import Versioned


@dataclass
class _Copy:
    """A session record as last written, parsed when first asked for."""

    revision: int
    data: bytes | None
    epoch: int
    parsed: SessionRecord | None = None


class SessionCopies:
    """The latest write of each session this gateway holds, with its revision. `epoch` tells
    the bus connection's reconnections: a copy made before the last one is not used."""

    def __init__(self) -> None:
        self._copies: dict[str, _Copy] = {}
        self.epoch: Callable[[], int] = lambda: 0
        self.held: Callable[[str], bool] = lambda session_id: False

    def get(self, session_id: str) -> Versioned[SessionRecord] | None:
        copy = self._copies.get(session_id)
        if copy is None:
            return None
        if copy.epoch != self.epoch():
            self._copies.pop(session_id, None)
            return None
        if copy.parsed is None:
            try:
                copy.parsed = SessionRecord.model_validate_json(copy.data or b"")
            except ValidationError:
                self._copies.pop(session_id, None)
                return None
        return Versioned(copy.parsed, copy.revision)

    def heard(self, session_id: str, revision: int, data: bytes) -> None:
        """A write of the session (a later one than the copy's, or nothing changes)."""
        copy = self._copies.get(session_id)
        if self.held(session_id) and (copy is None or revision > copy.revision):
            self._copies[session_id] = _Copy(revision, data, self.epoch())

    def wrote(self, session_id: str, written: Versioned[SessionRecord]) -> None:
        """What this gateway wrote or read (a republished copy of a write follows)."""
        copy = self._copies.get(session_id)
        if self.held(session_id) and (copy is None or written.revision > copy.revision):
            self._copies[session_id] = _Copy(written.revision, None, self.epoch(), written.value)

    def forget(self, session_id: str) -> None:
        self._copies.pop(session_id, None)
