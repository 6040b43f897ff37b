"""A person's decision on a parked action, from any surface: the deciding logic of
services/runtime/approvals/deciding.py, its refusals as the gateway's errors (not decidable: a
conflict; too late, the approval expired: a conflict too, `Expired`, though the request goes on
as declined; words that say neither yes nor no: invalid; the store or the bus not answering:
unavailable)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from contracts import RequestRecord
from services.gateway.core.errors import Conflict, Invalid, Unavailable
from services.runtime.approvals import deciding, questions
from services.runtime.approvals.deciding import waiting_on
from services.runtime.approvals.errors import (
    DecisionExpired,
    DecisionUnavailable,
    NotDecidable,
    UnclearAnswer,
)
from services.runtime.approvals.questions import HOW, NO, YES, approval_text
from services.runtime.approvals.records import Verdict
from services.runtime.bus.core import Bus
from services.runtime.requests.lifecycle import Tracked

__all__ = ["HOW", "NO", "YES", "Expired", "approval_text", "decide", "verdict_of", "waiting_on"]


class Expired(Conflict):
    """The decision came after the approval expired: refused, while the request goes on as
    declined (`record`, as it moved on)."""

    def __init__(self, message: str, record: RequestRecord) -> None:
        super().__init__(message)
        self.record = record


@contextmanager
def _as_gateway_error() -> Iterator[None]:
    try:
        yield
    except DecisionExpired as exc:
        raise Expired(exc.message, exc.record) from exc
    except NotDecidable as exc:
        raise Conflict(exc.message) from exc
    except UnclearAnswer as exc:
        raise Invalid(exc.message) from exc
    except DecisionUnavailable as exc:
        raise Unavailable(exc.message) from exc


def verdict_of(text: str) -> Verdict:
    """The decision a person's words say; Invalid when they say neither."""
    with _as_gateway_error():
        return questions.verdict_of(text)


async def decide(
    bus: Bus, principal: str, tracked: Tracked, words: str, approval_id: str | None
) -> RequestRecord:
    """Record `principal`'s decision (`words`) on the request's open approval and resume it."""
    with _as_gateway_error():
        return await deciding.decide(bus, principal, tracked, words, approval_id)
