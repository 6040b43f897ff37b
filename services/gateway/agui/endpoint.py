"""`POST /ag-ui`: an AG-UI run over SSE, behind the same bearer tokens, principals and limits as
every other surface.

- A run's `threadId` is the Sidekick session; its last user message is the request (earlier
  user and assistant messages its history). A run with `resume` answers the interrupt its thread
  is parked on (`payload`: answers by question id, or one string; `status: cancelled` cancels the
  request); a stale or answered interrupt gets 409 and changes nothing. A run without `resume`
  on a thread parked on a question answers it with its last user message, as
  `/v1/chat/completions` does.
- Every event has an SSE `id`. A client that lost its stream POSTs the same input again (same
  `runId`) with `Last-Event-ID`, or calls `GET /ag-ui/runs/{runId}` with it: it gets every event
  after that id from the bus, then the live ones, on any gateway replica. The same `runId`
  without `Last-Event-ID` re-attaches from the start; it never starts a second request.
- `POST /ag-ui/runs/{runId}/cancel` cancels the run's request (the stream ends with RUN_FINISHED,
  outcome `cancelled`); a dropped connection does not, so that the client can re-attach.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator

from ag_ui.core import BaseEvent, RunAgentInput, UserMessage
from pydantic import BaseModel, ConfigDict
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from contracts import ClarificationRequested, Turn, new_id
from contracts.frames import ID_PATTERN
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

ID = re.compile(ID_PATTERN)
EVENT_ID = re.compile(r"^(\d{1,19})\.(\d{1,6})$")
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
            position = last_event_id(request)
            known = await self._record(principal, body.run_id)
            if known is None:
                known = await self._start(principal, body)
            elif known.thread_id != body.thread_id:
                raise Conflict(f"Run {body.run_id} belongs to another thread.")
        except GatewayError as exc:
            return error_response(exc)
        return self._stream(known, position)

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
            position = last_event_id(request)
        except GatewayError as exc:
            return error_response(exc)
        return self._stream(known, position)

    async def cancel(self, request: Request) -> Response:
        try:
            principal, known = await self._run_in_path(request)
            await self.intake.cancel(principal, known.request_id)
        except GatewayError as exc:
            return error_response(exc)
        return JSONResponse({"run_id": known.run_id, "status": "cancelling"}, status_code=202)

    async def _start(self, principal: str, body: RunAgentInput) -> RunRecord:
        """A new run: the resumption of the thread's parked request, or a new request (a plain
        message on a thread parked on a question answers it, as on `/v1`)."""
        session_id = scoped(principal, body.thread_id)
        text, history = said(body)
        if body.resume:
            parked = await self._parked(principal, session_id)
            if parked is None:
                raise Conflict("This thread has no open interrupt (answered already, or stale).")
            return await self._resume(principal, body, parked)
        if not text:
            raise Invalid("messages holds no user message with text.")
        new = Submission(new_id(), history=history)
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
            text = payload if isinstance(payload, str) else said(body)[0]
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
        record = await self.intake.parked(principal, session_id)
        outcome = record.outcome if record is not None else None
        return outcome if isinstance(outcome, ClarificationRequested) else None

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

    def _stream(self, record: RunRecord, position: tuple[int, int] | None) -> Response:
        run = Run(record.thread_id, record.run_id, record.request_id, record.after)
        return StreamingResponse(
            self._events(run, position), media_type="text/event-stream", headers=SSE_HEADERS
        )

    async def _events(self, run: Run, position: tuple[int, int] | None) -> AsyncIterator[bytes]:
        """The run's events after `position` (all when None), replayed then live."""
        translator = Translator(run)
        for k, event in enumerate(translator.opening()):
            if position is None or (run.after, k) > position:
                yield frame(event, run.after, k)
        deadline = asyncio.get_running_loop().time() + LONGEST
        async for stored in self.feed.follow(run.request_id, run.after):
            if stored is None:
                if asyncio.get_running_loop().time() > deadline:
                    return
                yield b": keep-alive\n\n"
                continue
            for k, event in enumerate(translator.take(stored.event)):
                if position is None or (stored.seq, k) > position:
                    yield frame(event, stored.seq, k)
            if translator.done:
                return


def frame(event: BaseEvent, seq: int, k: int) -> bytes:
    return f"id: {seq}.{k}\ndata: {event.model_dump_json(by_alias=True)}\n\n".encode()


def last_event_id(request: Request) -> tuple[int, int] | None:
    raw = request.headers.get("last-event-id") or request.query_params.get("lastEventId")
    if not raw:
        return None
    found = EVENT_ID.match(raw.strip())
    if found is None:
        raise Invalid("Last-Event-ID is not an id this endpoint gave (<sequence>.<n>).")
    return int(found.group(1)), int(found.group(2))


def said(body: RunAgentInput) -> tuple[str, list[Turn]]:
    """The run's last user message as text, and the user and assistant turns before it."""
    turns: list[Turn] = []
    for message in body.messages:
        role = getattr(message, "role", "")
        content = getattr(message, "content", None)
        text = content if isinstance(content, str) else _parts_text(content)
        if role in ("user", "assistant") and text:
            turns.append(Turn(role=role, content=text))
    users = [n for n, m in enumerate(body.messages) if isinstance(m, UserMessage)]
    if not users or not turns or turns[-1].role != "user":
        return "", turns
    last = turns.pop()
    return last.content.strip(), turns


def _parts_text(content: object) -> str:
    if not isinstance(content, list):
        return ""
    return "\n".join(str(getattr(p, "text", "")) for p in content if getattr(p, "text", None))
