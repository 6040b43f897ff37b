"""A worker's result as a worker publishes it, for tests that bring one in themselves: to the
orchestrator over the bus (an orphan, a forgery) or into a request's record."""

from __future__ import annotations

from typing import Any

from contracts.decisions import WorkerType
from contracts.events import WorkerResult


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
