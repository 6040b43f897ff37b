"""A request's progress, as every producer publishes it (frontline, orchestrator, workers)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from contracts import Progress

if TYPE_CHECKING:
    from services.runtime.bus.core import Bus


async def emit_progress(bus: Bus, event: Progress, *, push: bool) -> None:
    """For its clients on core NATS (RESULTS keeps it as it passes), and on its push subject
    too when a client is notified of the request (its record's `push`, as the producer holds
    it; services/gateway/a2a/push.py): a request without a webhook costs nothing more."""
    await bus.emit(event, bus.subjects.progress(event.request_id, event.session_id))
    if push:
        await bus.emit(event, bus.subjects.push(event.request_id, "progress"))
