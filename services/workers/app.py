"""Composition root of the workers service: `sidekick run workers --kinds general,...`."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from contracts import Progress, WorkerResult, WorkerTask, WorkflowStatus
from services.runtime.base.settings import Settings
from services.runtime.bus.core import Bus, answer_key, outage
from services.runtime.hosting.host import ServiceHost, make_broker
from services.runtime.llm import LLMClient
from services.runtime.llm.calls import Tally, tallying
from services.runtime.llm.override import model_as
from services.runtime.requests.cancels import Cancellations
from services.workers.base import Worker, WorkerDeps, result_for
from services.workers.email import EmailWorker
from services.workers.general import GeneralWorker
from services.workers.research import ResearchWorker
from services.workers.search import SearchWorker
from services.workers.tools.worker import ToolsWorker

log = logging.getLogger("sidekick.workers")

REGISTRY: dict[str, Callable[[WorkerDeps], Worker]] = {
    "GENERAL": GeneralWorker,
    "SEARCH": SearchWorker,
    "RESEARCH": ResearchWorker,
    "EMAIL": EmailWorker,
    "TOOLS": ToolsWorker,
}


def available_kinds() -> list[str]:
    return sorted(REGISTRY)


def build(settings: Settings, kinds: list[str] | None = None) -> ServiceHost:
    chosen = [k.upper() for k in (kinds or settings.worker_kinds)]
    unknown = [k for k in chosen if k not in REGISTRY]
    if unknown:
        raise SystemExit(
            f"unknown worker kind(s): {', '.join(unknown)}; known: {', '.join(available_kinds())}"
        )
    bus = Bus(make_broker(settings, "workers"), settings, "workers")
    llm = LLMClient(
        settings.llm("worker"), timeout=settings.llm_timeout, max_retries=settings.llm_max_retries
    )

    async def stage(task: WorkerTask, status: WorkflowStatus, detail: str) -> None:
        # Workers may not touch the request records (they hold other requests' answers): the
        # step goes out as progress, and the gateway brings the record up to date.
        step = Progress(
            request_id=task.request_id,
            session_id=task.session_id,
            stage="worker_step",
            detail=detail,
            workflow_status=status,
        )
        await bus.emit(step, bus.subjects.step(task.request_id, task.session_id))

    deps = WorkerDeps(bus=bus, settings=settings, llm=llm, stage=stage)
    cancels = Cancellations(bus)
    on_ready: list[Callable[[], Awaitable[None]]] = []
    on_stop: list[Callable[[], Awaitable[None]]] = []
    for kind in chosen:
        worker = REGISTRY[kind](deps)
        _register(bus, worker, cancels)
        startup = getattr(worker, "startup", None)
        if startup is not None:
            on_ready.append(startup)
        # What a worker started (the browser, MCP servers' processes) ends with the service.
        aclose = getattr(worker, "aclose", None)
        if aclose is not None:
            on_stop.append(aclose)
    return ServiceHost("workers", settings, bus, on_ready=on_ready, on_stop=on_stop)


def _register(bus: Bus, worker: Worker, cancels: Cancellations) -> None:
    async def handle(task: WorkerTask) -> None:
        if await cancels.check(task.request_id, issued=task.ts):
            return  # cancelled before it started: no work, no side effect
        # What its model calls spend, however each ends; a replay's model, if it asked for one.
        with tallying() as spent, model_as(task.model):
            work = asyncio.create_task(worker.run(task))
        try:
            if not await cancels.run(task.request_id, work):
                log.info("%s work for %s stopped: cancelled", worker.kind, task.request_id)
                return
            result = work.result()
        except Exception as exc:  # a bug in a worker must still end the attempt
            if outage(exc):  # the bus is away (e.g. the ledger's claim timed out): not a bug;
                raise  # the consumer retries the task with one WARNING line, no traceback
            log.exception("%s worker crashed on %s", worker.kind, task.request_id)
            result = result_for(task, success=False, error=f"internal error: {exc!r}")
        await _publish(task, result, spent)

    async def exhausted(task: WorkerTask, exc: BaseException) -> None:
        await _publish(task, result_for(task, success=False, error=f"delivery exhausted: {exc}"))

    async def _publish(task: WorkerTask, result: WorkerResult, spent: Tally | None = None) -> None:
        # The task's token goes back with the result (the orchestrator takes no result without
        # it), and keys the result's dedupe id, so no other service can guess that id.
        token = task.dispatch_token
        result = result.model_copy(update={"dispatch_token": token})
        if spent is not None and not result.success and result.usage.calls < spent.usage.calls:
            # A failure that lost what its calls spent (a model error, a timeout): the tally's.
            tools = result.usage.tool_calls
            usage = spent.usage.model_copy(update={"tool_calls": tools})
            result = result.model_copy(update={"usage": usage})
        await bus.publish(
            result,
            bus.subjects.worker_completed,
            dedupe_key=answer_key(result.request_id, "result", result.attempt, token),
        )

    bus.durable(
        bus.subjects.worker_run(worker.kind),
        WorkerTask,
        handle,
        consumer=f"worker_{worker.kind.lower()}",
        on_exhausted=exhausted,
    )
