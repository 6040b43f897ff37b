"""An OpenAI-compatible endpoint, so the `openai` SDKs and chat front ends (Open WebUI, ...)
talk to Sidekick: `POST /v1/chat/completions` (JSON or SSE) and `GET /v1/models`, behind the
same bearer tokens and principals as the WebSocket.

The last user message is the request and the earlier ones its history; the conversation
(Sidekick's session) is the `user` field or the `X-Sidekick-Session` header, else a new one
per call. In a named conversation a question Sidekick asked is answered by the next call's
user message, and requests wait their turn as on the WebSocket. `sidekick-direct` skips the
evaluator loop. Progress (routed, attempts, verdicts) travels in the added `sidekick` field.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from contracts import (
    OUTCOMES,
    AnyEvent,
    Outcome,
    Progress,
    RequestFailed,
    StreamChunk,
    Turn,
    new_id,
)
from contracts.frames import ID_PATTERN, ProgressEvent
from contracts.openai import (
    MODELS,
    AssistantMessage,
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionRequest,
    Choice,
    ChunkChoice,
    Delta,
    ModelCard,
    ModelList,
    OpenAIError,
    OpenAIErrorBody,
    SidekickInfo,
)
from services.gateway.core.auth import Auth
from services.gateway.core.errors import GatewayError, Invalid, NotFound, Unauthorized
from services.gateway.core.http import parse_body, principal_of
from services.gateway.core.hub import Hub
from services.gateway.core.intake import Intake, scoped
from services.gateway.core.outcomes import progress_frame
from services.gateway.core.said import Accepted, Answered, Refused, Submission, TooLong, Words
from services.gateway.openai.shapes import (
    CREATED,
    WAIT,
    Call,
    answer_of,
    card,
    info,
    openai_error,
    refused,
    timeout_error,
    usage_of,
)

KEEPALIVE = 15.0  # an SSE comment this often while nothing else is sent
SESSION_HEADER = "x-sidekick-session"
SESSION = re.compile(ID_PATTERN)


class OpenAIApi:
    def __init__(self, hub: Hub[Any], intake: Intake, auth: Auth) -> None:
        self.hub = hub
        self.intake = intake
        self.auth = auth
        self.bus = intake.bus
        self._tasks: set[asyncio.Task[None]] = set()

    def routes(self) -> list[Route]:
        return [
            Route("/v1/models", self.models, methods=["GET"]),
            Route("/v1/models/{model}", self.model, methods=["GET"]),
            Route("/v1/chat/completions", self.completions, methods=["POST"]),
        ]

    async def models(self, request: Request) -> Response:
        try:
            principal_of(request, self.auth)
        except Unauthorized as exc:
            return refused(exc)
        cards = [
            ModelCard(id=m, object="model", created=CREATED, owned_by="sidekick") for m in MODELS
        ]
        return JSONResponse(ModelList(object="list", data=cards).model_dump(mode="json"))

    async def model(self, request: Request) -> Response:
        try:
            principal_of(request, self.auth)
        except Unauthorized as exc:
            return refused(exc)
        name = str(request.path_params["model"])
        if name not in MODELS:
            return openai_error(404, f"The model '{name}' does not exist.", "model_not_found")
        return JSONResponse(card(name).model_dump(mode="json"))

    async def completions(self, request: Request) -> Response:
        stack = contextlib.AsyncExitStack()
        try:
            principal = principal_of(request, self.auth)
            body = await parse_body(request, ChatCompletionRequest)
            call = await self._start(principal, body, request, stack)
        except GatewayError as exc:
            await stack.aclose()
            return refused(exc)
        if body.stream:
            return StreamingResponse(
                self._stream(call, body, stack),
                media_type="text/event-stream",
                headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
            )
        async with stack:
            return await self._complete(call, body)

    async def _start(
        self,
        principal: str,
        body: ChatCompletionRequest,
        request: Request,
        stack: contextlib.AsyncExitStack,
    ) -> Call:
        if body.model not in MODELS:
            raise NotFound(
                f"The model '{body.model}' does not exist; Sidekick offers {', '.join(MODELS)}."
            )
        users = [n for n, m in enumerate(body.messages) if m.role == "user" and m.text.strip()]
        if not users:
            raise Invalid("messages holds no user message with text.")
        last = users[-1]
        text = body.messages[last].text.strip()
        history = [
            Turn(role=m.role, content=m.text)
            for m in body.messages[:last]
            if m.role in ("user", "assistant") and m.text
        ]
        uuid = body.user or request.headers.get(SESSION_HEADER) or f"v1-{new_id()}"
        if not _valid_session(uuid):
            raise Invalid(
                "The session (user or X-Sidekick-Session) must be 1-128 of A-Z a-z 0-9 _ . : -."
            )
        events: list[asyncio.Queue[AnyEvent]] = []
        session_id = scoped(principal, uuid)

        async def watch(request_id: str, answering: bool) -> None:
            # Before the words are sent, so that no event of the request is missed (a parked
            # request they answer is the session's own).
            events.append(await stack.enter_async_context(self.hub.watch(request_id, session_id)))

        new = Submission(new_id(), use_evaluator=body.model == "sidekick", history=history)
        said = await self.intake.say(
            principal, session_id, Words(text), to=new, surface="openai", before=watch
        )
        if isinstance(said, TooLong):
            raise Invalid(said.message)
        if isinstance(said, Refused):
            raise said.error
        assert isinstance(said, Accepted | Answered) and events
        call = Call(said.request_id, uuid, events[0])
        if isinstance(said, Accepted):
            stack.callback(self._abandoned, principal, call)
        return call

    async def _complete(self, call: Call, body: ChatCompletionRequest) -> Response:
        progress: list[ProgressEvent] = []
        try:
            outcome = await self._outcome(call, progress)
        except TimeoutError:
            return JSONResponse(timeout_error(call).model_dump(mode="json"), status_code=504)
        if isinstance(outcome, RequestFailed):
            return openai_error(500, outcome.error, outcome.code)
        completion = ChatCompletion(
            id=f"chatcmpl-{call.request_id}",
            object="chat.completion",
            created=int(time.time()),
            model=body.model,
            choices=[
                Choice(
                    index=0,
                    message=AssistantMessage(role="assistant", content=answer_of(outcome)),
                    finish_reason="stop",
                )
            ],
            usage=usage_of(outcome),
            sidekick=info(call, outcome, progress),
        )
        call.ended = True
        return JSONResponse(completion.model_dump(mode="json"))

    async def _outcome(self, call: Call, progress: list[ProgressEvent]) -> Outcome:
        try:
            async with asyncio.timeout(WAIT):
                while True:
                    event = await call.events.get()
                    if isinstance(event, Progress):
                        progress.append(progress_frame(event))
                    elif isinstance(event, OUTCOMES):
                        return event
        except TimeoutError:
            stored = await self.intake.outcome(call.request_id)
            if stored is not None:
                return stored
            raise

    async def _stream(
        self, call: Call, body: ChatCompletionRequest, stack: contextlib.AsyncExitStack
    ) -> AsyncIterator[bytes]:
        created = int(time.time())

        def chunk(
            delta: Delta, finish: bool = False, sidekick: SidekickInfo | None = None
        ) -> bytes:
            return ChatCompletionChunk(
                id=f"chatcmpl-{call.request_id}",
                object="chat.completion.chunk",
                created=created,
                model=body.model,
                choices=[
                    ChunkChoice(index=0, delta=delta, finish_reason="stop" if finish else None)
                ],
                sidekick=sidekick,
            ).sse()

        async with stack:
            yield chunk(Delta(role="assistant", content=""))
            streamed, progress = "", []
            deadline = asyncio.get_running_loop().time() + WAIT
            while True:
                left = deadline - asyncio.get_running_loop().time()
                if left <= 0:
                    yield timeout_error(call).sse()
                    break
                try:
                    event: AnyEvent = await asyncio.wait_for(
                        call.events.get(), min(KEEPALIVE, left)
                    )
                except TimeoutError:
                    yield b": keep-alive\n\n"
                    continue
                if isinstance(event, StreamChunk):
                    streamed += event.text
                    yield chunk(Delta(content=event.text))
                elif isinstance(event, Progress):
                    frame = progress_frame(event)
                    progress.append(frame)
                    working = SidekickInfo(
                        request_id=call.request_id,
                        session=call.session,
                        status="working",
                        progress=[frame],
                    )
                    yield chunk(Delta(), sidekick=working)
                elif isinstance(event, OUTCOMES):
                    call.ended = True
                    if isinstance(event, RequestFailed):
                        body_ = OpenAIErrorBody(
                            message=event.error, type="server_error", code=event.code
                        )
                        yield OpenAIError(error=body_).sse()
                        break
                    answer = answer_of(event)
                    rest = answer[len(streamed) :] if answer.startswith(streamed) else answer
                    if rest:
                        yield chunk(Delta(content=rest))
                    yield chunk(Delta(), finish=True, sidekick=info(call, event, progress))
                    if body.stream_options is not None and body.stream_options.include_usage:
                        yield ChatCompletionChunk(
                            id=f"chatcmpl-{call.request_id}",
                            object="chat.completion.chunk",
                            created=created,
                            model=body.model,
                            choices=[],
                            usage=usage_of(event),
                        ).sse()
                    break
            yield b"data: [DONE]\n\n"

    def _abandoned(self, principal: str, call: Call) -> None:
        """The caller went away (or gave up waiting) before the answer: stop the work for it."""
        if call.ended:
            return

        async def cancel() -> None:
            with contextlib.suppress(GatewayError):
                await self.intake.cancel(principal, call.request_id)

        task = asyncio.get_running_loop().create_task(cancel())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _valid_session(uuid: str) -> bool:
    return SESSION.match(uuid) is not None
