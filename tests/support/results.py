"""A worker's result as a worker publishes it, for tests that bring one in themselves: to the
orchestrator over the bus (an orphan, a forgery) or into a request's record; and a request's
record as it stands once ended, for tests of what is built from one."""

from __future__ import annotations

from typing import Any

from contracts.decisions import WorkerType
from contracts.events import WorkerResult
from contracts.state import RequestRecord


def succeeded(
    request_id: str, session_id: str, worker_type: WorkerType, output: str, **fields: Any
) -> WorkerResult:
    """Attempt 1 of `request_id` done by a `worker_type` worker, with `output`; `fields` as
    WorkerResult takes them (usage, tool calls, ...)."""
    return WorkerResult(
        request_id=request_id,
        session_id=session_id,
        attempt=1,
        worker_type=worker_type,
        success=True,
        output=output,
        **fields,
    )


def ended_record(**fields: Any) -> RequestRecord:
    """Alice's completed request `r1` in session `alice/s1`; `fields` change or add to it."""
    return RequestRecord.model_validate(
        {
            "request_id": "r1",
            "session_id": "alice/s1",
            "principal": "alice",
            "text": "search the tides",
            "status": "completed",
            "state": "completed",
            **fields,
        }
    )
