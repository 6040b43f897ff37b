"""`POST /ag-ui`: an AG-UI run over SSE, behind the same bearer tokens, principals and limits as
every other surface.

- A run's `threadId` is the Sidekick session; its last user message is the request (earlier
  user and assistant messages its history). A run with `resume` answers the interrupt its thread
  is parked on (`payload`: answers by question id, or one string; `status: cancelled` cancels the
  request); a stale or answered interrupt gets 409 and changes nothing. A run without `resume`
  on a thread parked on a question answers it with its last user message, as
  `/v1/chat/completions` does.
- Frontend tools (`tools`) are offered to the model beside Sidekick's own; a call of one ends
  the run with its TOOL_CALL_* events and `pendingToolCallIds`, and the request parks until a
  run on the thread carries a `tool` message for each call (then it goes on, once); `context`
  reaches the models as data (agui/inputs.py, contracts/frontend.py).
- Every event has an id (the SSE `id` and `metadata.sidekick.eventId`). A client that lost its
  stream POSTs the same input again (same `runId`) with the last id it saw
  (`forwardedProps.sidekick.lastEventId`, or `Last-Event-ID`), or calls `GET /ag-ui/runs/{runId}`
  with it: it gets `RUN_STARTED` and what was open, then every event after that id from the bus,
  then the live ones, on any gateway replica (agui/stream.py). The same `runId` without an id
  re-attaches from the start; it never starts a second request.
- `POST /ag-ui/runs/{runId}/cancel` cancels the run's request (the stream ends with RUN_FINISHED,
  outcome `cancelled`). A dropped connection does not, so that the client can re-attach, unless
  the run asked for it (`forwardedProps.sidekick.cancelOnDisconnect: true`).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator

from ag_ui.core import RunAgentInput
from pydantic import BaseModel, ConfigDict
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from contracts import ClarificationRequested, new_id
from contracts.frames import ID_PATTERN
from services.gateway.agui import inputs
from services.gateway.agui.inputs import Extras, Position
from services.gateway.agui.stream import Cut
from services.gateway.agui.translate import Run, Translator
from services.gateway.core.auth import Auth
from services.gateway.core.errors import Conflict, GatewayError, Invalid, NotFound
from services.gateway.core.feed import Feed
from services.gateway.core.http import error_response, parse_body, principal_of
from services.gateway.core.intake import Intake, scoped
from services.gateway.core.said import (
    Refused,
    Reply,
    Submission,
    TooLong,
    Waiting,
    Words,
)
from services.runtime.bus.kvstore import get_model, key_for

log = logging.getLogger("sidekick.gateway")

ID = re.compile(ID_PATTERN)
LONGEST = 3600.0  # seconds one connection streams; the client re-attaches after that
SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}


class RunRecord(BaseModel):
    """What a run id stands for, kept so a re-attach on any replica finds it."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    thread_id: str
    run_id: str
    request_id: str
    after: int


class AgUiApi:
    def __init__(self, intake: Intake, auth: Auth, feed: Feed) -> None:
        self.intake = intake
        self.auth = auth
        self.feed = feed
        self.bus = intake.bus
        self._cancels: set[asyncio.Task[None]] = set()  # cancels of disconnected runs

    def routes(self) -> list[Route]:
        return [
            Route("/ag-ui", self.run, methods=["POST"]),
            Route("/ag-ui/runs/{run_id}", self.reattach, methods=["GET"]),
            Route("/ag-ui/runs/{run_id}/cancel", self.cancel, methods=["POST"]),
        ]

    async def run(self, request: Request) -> Response:
        try:
            principal = principal_of(request, self.auth)
            body = await parse_body(request, RunAgentInput)
            for name, value in (("threadId", body.thread_id), ("runId", body.run_id)):
                if not ID.match(value):
                    raise Invalid(f"{name} must be 1-128 of A-Z a-z 0-9 _ . : -.")
            extras = inputs.extras(request, body, self.bus.settings.max_message_chars)
            known = await self._record(principal, body.run_id)
            if known is None:
                known = await self._start(principal, body, extras)
            elif known.thread_id != body.thread_id:
                raise Conflict(f"Run {body.run_id} belongs to another thread.")
        except GatewayError as exc:
            return error_response(exc)
        cancel = principal if extras.cancel_on_disconnect else None
        return self._stream(known, extras.position, cancel)

    async def _run_in_path(self, request: Request) -> tuple[str, RunRecord]:
        """The caller and the run its path names (one of the caller's own), or NotFound."""
        principal = principal_of(request, self.auth)
        run_id = str(request.path_params["run_id"])
        known = await self._record(principal, run_id) if ID.match(run_id) else None
        if known is None:
            raise NotFound(f"No run {run_id[:64]!r}.")
        return principal, known

    async def reattach(self, request: Request) -> Response:
        try:
            _, known = await self._run_in_path(request)
            position = inputs.position_of(request)
        except GatewayError as exc:
            return error_response(exc)
        return self._stream(known, position, None)

    async def cancel(self, request: Request) -> Response:
        try:
            principal, known = await self._run_in_path(request)
            await self.intake.cancel(principal, known.request_id)
        except GatewayError as exc:
            return error_response(exc)
        return JSONResponse({"run_id": known.run_id, "status": "cancelling"}, status_code=202)

    async def _start(self, principal: str, body: RunAgentInput, extras: Extras) -> RunRecord:
        """A new run: the resumption of the thread's parked request (by an interrupt's answer,
        or by the results of the client's tool calls it waits for), or a new request (a plain
        message on a thread parked on a question answers it, as on `/v1`)."""
        session_id = scoped(principal, body.thread_id)
        if body.resume:
            parked = await self._parked(principal, session_id)
            if parked is None:
                raise Conflict("This thread has no open interrupt (answered already, or stale).")
            return await self._resume(principal, body, parked)
        results = inputs.tool_results(body, self.bus.settings.max_message_chars)
        if results:  # checked against the calls it waits for by the intake (core/answers.py)
            waiting = await self.intake.parked(principal, session_id)
            if waiting is None:
                raise Conflict(
                    "This thread has no tool call waiting for a result (answered already, or "
                    "never issued); nothing was changed."
                )
            words = Words(tool_results=results)
            return await self._say(principal, body, session_id, words, Reply(waiting.request_id))
        text, history = inputs.said(body)
        if not text:
            raise Invalid("messages holds no user message with text.")
        new = Submission(
            new_id(), history=history, frontend_tools=extras.tools, context=extras.context
        )
        return await self._say(principal, body, session_id, Words(text), new)

    async def _resume(
        self, principal: str, body: RunAgentInput, parked: ClarificationRequested
    ) -> RunRecord:
        assert body.resume is not None
        entry = next((e for e in body.resume if e.interrupt_id == parked.event_id), None)
        if entry is None:
            named = ", ".join(e.interrupt_id for e in body.resume)[:200]
            raise Conflict(
                f"The interrupt {named} is not open (answered already, or stale); "
                f"the open one is {parked.event_id}."
            )
        if entry.status == "cancelled":
            record = await self._resumed(principal, body, parked.request_id)
            await self.intake.cancel(principal, parked.request_id)
            return record
        payload = entry.payload
        if isinstance(payload, dict):
            words = Words(answers={str(k): str(v) for k, v in payload.items()})
        else:
            text = payload if isinstance(payload, str) else inputs.said(body)[0]
            if not text:
                raise Invalid("resume[].payload holds no answer (an object or a string).")
            words = Words(text)
        session_id = scoped(principal, body.thread_id)
        return await self._say(principal, body, session_id, words, Reply(parked.request_id))

    async def _say(
        self,
        principal: str,
        body: RunAgentInput,
        session_id: str,
        words: Words,
        to: Submission | Reply,
    ) -> RunRecord:
        """The words through the intake, the run kept (before they are sent, so that a client
        re-attaching finds it) and forgotten again when they are refused."""
        kept: list[RunRecord] = []

        async def keep(request_id: str, answering: bool) -> None:
            if answering:
                kept.append(await self._resumed(principal, body, request_id))
                return
            run = RunRecord(
                thread_id=body.thread_id, run_id=body.run_id, request_id=request_id, after=0
            )
            await self._keep(principal, run)
            kept.append(run)

        said = await self.intake.say(
            principal, session_id, words, to=to, surface="agui", before=keep
        )
        if isinstance(said, TooLong):
            raise Invalid(said.message)
        if isinstance(said, Refused):
            if kept:
                await self._forget(principal, body.run_id)
            raise said.error
        assert not isinstance(said, Waiting) and kept
        return kept[0]

    async def _resumed(self, principal: str, body: RunAgentInput, request_id: str) -> RunRecord:
        """The run that goes on from the parked event (of the thread's session): its events are
        those stored after it."""
        session_id = scoped(principal, body.thread_id)
        subject = self.bus.subjects.request_clarification(request_id, session_id)
        after = await self.feed.last(subject)
        record = RunRecord(
            thread_id=body.thread_id,
            run_id=body.run_id,
            request_id=request_id,
            after=after,
        )
        await self._keep(principal, record)
        return record

    async def _parked(self, principal: str, session_id: str) -> ClarificationRequested | None:
        """The interrupt the thread is parked on (not a wait for its client's tools)."""
        record = await self.intake.parked(principal, session_id)
        outcome = record.outcome if record is not None else None
        if not isinstance(outcome, ClarificationRequested) or outcome.tool_calls:
            return None
        return outcome

    def _key(self, principal: str, run_id: str) -> str:
        return f"agui.{key_for(principal)}.{key_for(run_id)}"

    async def _record(self, principal: str, run_id: str) -> RunRecord | None:
        index = await self.bus.bucket("index")
        found, _ = await get_model(index, self._key(principal, run_id), RunRecord)
        return found

    async def _keep(self, principal: str, record: RunRecord) -> None:
        index = await self.bus.bucket("index")
        await index.put(self._key(principal, record.run_id), record.model_dump_json().encode())

    async def _forget(self, principal: str, run_id: str) -> None:
        index = await self.bus.bucket("index")
        await index.delete(self._key(principal, run_id))

    def _stream(
        self, record: RunRecord, position: Position | None, cancel_for: str | None
    ) -> Response:
        run = Run(record.thread_id, record.run_id, record.request_id, record.after)
        return StreamingResponse(
            self._events(run, position, cancel_for),
            media_type="text/event-stream",
            headers=SSE_HEADERS,
        )

    async def _events(
        self, run: Run, position: Position | None, cancel_for: str | None
    ) -> AsyncIterator[bytes]:
        """The run's events after `position` (all when None), replayed then live. With
        `cancel_for` (the run's principal), a client that goes away before the run's end
        cancels its request."""
        translator = Translator(run)
        opening = translator.opening()
        cut = Cut(position, opening[0], (run.after, 0))
        ended = False
        try:
            for chunk in cut.opening():
                yield chunk
            for k, event in enumerate(opening):
                for chunk in cut.take(event, run.after, k):
                    yield chunk
            deadline = asyncio.get_running_loop().time() + LONGEST
            async for stored in self.feed.follow(run.request_id, run.after):
                if stored is None:
                    if asyncio.get_running_loop().time() > deadline:
                        ended = True  # the client re-attaches: this is no disconnect
                        return
                    yield b": keep-alive\n\n"
                    continue
                for k, event in enumerate(translator.take(stored.event)):
                    for chunk in cut.take(event, stored.seq, k):
                        yield chunk
                if translator.done:
                    for chunk in cut.closing():
                        yield chunk
                    ended = True
                    return
        finally:
            if not ended and cancel_for is not None:
                self._cancel_later(cancel_for, run)

    def _cancel_later(self, principal: str, run: Run) -> None:
        """Cancel the run's request, its client gone (the stream's own task is being torn
        down: the cancel runs on its own)."""
        task = asyncio.get_running_loop().create_task(self._cancel_quietly(principal, run))
        self._cancels.add(task)
        task.add_done_callback(self._cancels.discard)

    async def _cancel_quietly(self, principal: str, run: Run) -> None:
        log.info("run %s: its client disconnected; cancelling (cancelOnDisconnect)", run.run_id)
        try:
            await self.intake.cancel(principal, run.request_id)
        except Conflict:
            return  # it ended meanwhile
        except GatewayError as exc:
            log.warning("could not cancel run %s after its client left: %s", run.run_id, exc)
