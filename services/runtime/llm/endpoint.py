"""One model endpoint (base URL, key, model) and the raw calls to it, each measured and traced.

Calls are POSTs made by transport.py on the process's one aiohttp session, with the `openai`
SDK's headers and error types and the body serialized once by orjson; the reply is read as raw
JSON, streamed replies by a small SSE loop (sse.py). The SDK's `chat.completions.create()` spent
about 1.6 ms of CPU a call transforming its parameters and building typed reply objects, and
its lower-level `post()` still about 0.9 ms more than the POST itself (`python -m
bench.hotspots`).

Each attempt is bounded as a whole, connect to last token, and retried by calls.py's rules (429,
5xx, connection errors and timeouts with back-off honouring `Retry-After`; never a capability
answer). What is left after the retries becomes `LLMUnavailable`, marked transient (a fallback
endpoint may help) or not (the server answered 4xx: it would answer the same again). A reply
cut at its `max_tokens` is logged and counted as such; a server's missing usage is counted here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, TypeVar

import openai
import orjson
from opentelemetry import trace

from contracts import Usage
from services.runtime.base.errors import LLMNotConfigured, LLMUnavailable
from services.runtime.base.metrics import LLM_ERRORS, LLM_LATENCY, LLM_TOKENS
from services.runtime.base.settings import LLMConfig
from services.runtime.base.telemetry import spans_recorded
from services.runtime.llm import calls as rules
from services.runtime.llm import transport
from services.runtime.llm.calls import CallTimeout
from services.runtime.llm.modes import MODES
from services.runtime.llm.override import chosen
from services.runtime.llm.sse import StreamError, as_text, events, gather_tool_calls
from services.runtime.llm.transport import TRANSPORT_ERRORS, Response
from services.runtime.llm.types import ChatReply, Messages, StreamResult, ToolCall

log = logging.getLogger("sidekick.llm")
R = TypeVar("R")
_tracer = trace.get_tracer("sidekick.llm")
# What a call can fail with: the SDK's errors (after its retries), the HTTP client's while a body
# is read, a bad event mid-stream, or a reply that is not the JSON it should be.
CALL_ERRORS: tuple[type[Exception], ...] = (
    openai.OpenAIError,
    StreamError,
    ValueError,  # orjson.JSONDecodeError is one
    KeyError,
    TypeError,
    CallTimeout,
    *TRANSPORT_ERRORS,
)
# What ends a call before its answer: a failure, or the caller's task cancelled.
CALLS_CUT: tuple[type[BaseException], ...] = (*CALL_ERRORS, asyncio.CancelledError)
STREAM_OPTIONS = {"include_usage": True}
RETRY_CAP = 30.0  # seconds: the longest back-off between two attempts


class Endpoint:
    """Create once per process and share."""

    def __init__(self, config: LLMConfig, *, timeout: float, max_retries: int) -> None:
        self.config = config
        self.role = config.role
        self.model = config.model
        self.key = (config.base_url or "https://api.openai.com/v1", config.model)
        self.timeout = timeout
        self.max_retries = max_retries
        self.retry_cap = RETRY_CAP
        self._client: openai.AsyncOpenAI | None = None
        if config.configured:
            self._client = openai.AsyncOpenAI(
                base_url=config.base_url,
                # Local servers (Ollama, vLLM, llama.cpp) accept any key.
                api_key=config.api_key or "not-needed",
                timeout=timeout,
                max_retries=0,  # retried here, by calls.py's rules
            )
        self._target = transport.Target.of(self._client) if self._client else None
        # Metric children looked up once, not on every call.
        self._ok = LLM_LATENCY.labels(self.role, self.model, "ok")
        self._tokens_in = LLM_TOKENS.labels(self.role, self.model, "input")
        self._tokens_out = LLM_TOKENS.labels(self.role, self.model, "output")
        self._attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": "openai",
            "gen_ai.request.model": self.model,
            "sidekick.role": self.role,
        }

    @property
    def configured(self) -> bool:
        return self._client is not None

    def _require(self) -> transport.Target:
        if self._target is None:
            raise LLMNotConfigured(self.role)
        return self._target

    def _record(self, usage: Usage, started: float, span: trace.Span) -> None:
        self._ok.observe(time.perf_counter() - started)
        self._tokens_in.inc(usage.input_tokens)
        self._tokens_out.inc(usage.output_tokens)
        span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)

    def _span(self, operation: str = "chat") -> Any:
        """The call's span; none where spans are not recorded (no exporter): nothing would
        read it, no span is made inside it, and the step's own span carries the trace."""
        if not spans_recorded():
            return contextlib.nullcontext(trace.INVALID_SPAN)
        attributes = self._attributes
        if operation != "chat":
            attributes = {**attributes, "gen_ai.operation.name": operation}
        return _tracer.start_as_current_span(
            f"{operation} {self.model}", kind=trace.SpanKind.CLIENT, attributes=attributes
        )

    def _fail(self, exc: Exception, span: trace.Span, started: float) -> LLMUnavailable:
        kind = type(exc).__name__
        LLM_ERRORS.labels(self.role, self.model, kind).inc()
        LLM_LATENCY.labels(self.role, self.model, "error").observe(time.perf_counter() - started)
        span.set_status(trace.Status(trace.StatusCode.ERROR, kind))
        status = getattr(exc, "status_code", None)
        transient = not rules.capability_answer(exc) and (
            status is None or status == 429 or status >= 500
        )
        return LLMUnavailable(
            self.role,
            self.model,
            f"The {self.role} model ({self.model} at {self.config.where}) failed: {exc}",
            transient=transient,
            status=status,
        )

    async def _answer(self, path: str, body: dict[str, Any]) -> bytes:
        """The whole answer of the first attempt that got one (`_attempts`)."""
        target, content = self._require(), orjson.dumps(body)
        answer, _ = await self._attempts(lambda: transport.answer(target, path, content))
        return answer

    async def _open(self, path: str, body: dict[str, Any]) -> tuple[Response, float]:
        """The response of the first attempt that got one, its streamed body still to read,
        and that attempt's deadline (`_attempts`)."""
        target, content = self._require(), orjson.dumps(body)
        return await self._attempts(lambda: transport.post(target, path, content))

    async def _attempts(self, attempt: Callable[[], Awaitable[R]]) -> tuple[R, float]:
        """What the first attempt that succeeded got, and its deadline. Each attempt is bounded
        by the timeout; when it runs out the request is cancelled, which closes its connection."""
        loop = asyncio.get_running_loop()
        tries = 0
        while True:
            deadline = loop.time() + self.timeout
            try:
                async with asyncio.timeout_at(deadline):
                    return await attempt(), deadline
            except TimeoutError:
                error: Exception = CallTimeout(f"no answer within {self.timeout:g}s")
            except openai.OpenAIError as exc:
                error = exc
            if tries >= self.max_retries or not rules.retryable(error):
                raise error
            await asyncio.sleep(rules.backoff(tries, error, self.retry_cap))
            tries += 1

    def _cut(self, finish: str | None, body: dict[str, Any], used: int) -> None:
        """Report a reply that stopped at its max_tokens (one line, and the error metric): the
        server says so, or it used every token allowed (llama.cpp ends a forced tool call with
        `tool_calls` whatever stopped it)."""
        limit = body.get("max_tokens")
        if finish != "length" and not (isinstance(limit, int) and used >= limit):
            return
        LLM_ERRORS.labels(self.role, self.model, "max_tokens").inc()
        log.warning(
            "%s: %s stopped at max_tokens=%s, so its reply is cut short (SIDEKICK_LLM_MAX_"
            "TOKENS_SHORT / _ANSWER set the limits)",
            self.role,
            self.model,
            body.get("max_tokens", "its own limit"),
        )

    async def chat(self, messages: Messages, **extra: Any) -> ChatReply:
        if self.config.stream_calls:
            return await self._chat_streamed(messages, extra)
        self._require()
        started = time.perf_counter()
        body = {"model": chosen(self.model), "messages": messages, **extra}
        with self._span() as span:
            try:
                data = orjson.loads(await self._answer("/chat/completions", body))
            except CALLS_CUT as exc:
                if isinstance(exc, CallTimeout | asyncio.CancelledError):  # the prompt was read
                    rules.tally(rules.counted(self.model, messages, "", extra))
                if not isinstance(exc, Exception):
                    raise
                raise self._fail(exc, span, started) from exc
            model = data.get("model") or self.model
            span.set_attribute("gen_ai.response.model", model)
            choices = data.get("choices") or []
            if not choices:
                raise self._fail(ValueError("the reply had no choices"), span, started)
            choice = choices[0]
            finish = choice.get("finish_reason")
            if finish:
                span.set_attribute("gen_ai.response.finish_reasons", [finish])
            message = choice.get("message") or {}
            calls = [
                ToolCall(
                    id=str(call.get("id") or ""),
                    name=str(fn.get("name") or ""),
                    arguments=as_text(fn.get("arguments")),
                )
                for call in message.get("tool_calls") or []
                if isinstance(fn := call.get("function"), dict)
            ]
            content = message.get("content") or ""
            reported = rules.reported(data.get("usage"))
            MODES.usage_seen(self.key, reported)
            if reported:
                usage = rules.usage_of(data.get("usage"), model)
            else:
                said = content + "".join(c.arguments for c in calls)
                usage = rules.counted(model, messages, said, extra)
            self._record(usage, started, span)
            self._cut(finish, body, usage.output_tokens)
            rules.tally(usage)
            return ChatReply(
                content=content, tool_calls=calls, finish_reason=finish, usage=usage, model=model
            )

    async def _chat_streamed(self, messages: Messages, extra: dict[str, Any]) -> ChatReply:
        """`chat` as a stream read to its end (SIDEKICK_LLM_STREAM_CALLS)."""
        result = StreamResult()
        async with contextlib.aclosing(self.stream(messages, result, **extra)) as deltas:
            async for _ in deltas:
                pass
        return ChatReply(
            content=result.text,
            tool_calls=result.tool_calls,
            finish_reason=result.finish_reason,
            usage=result.usage,
            model=result.model,
        )

    async def stream(
        self, messages: Messages, result: StreamResult, **extra: Any
    ) -> AsyncGenerator[str, None]:
        """Text deltas as they arrive; function calls the model makes are gathered in
        `result.tool_calls` (complete once the iteration ends). Closing the generator early,
        or the timeout running out, closes the response, which stops the model.

        `result.usage` is what the call spent however it ends: the server's usage when its
        last event came, else (a stream closed early by the caller, cancelled, timed out or
        failed once the server had begun to answer) counted here from what was sent and what
        came back, marked as counted (`Usage.counted_calls`)."""
        self._require()
        started = time.perf_counter()
        body = {
            "model": chosen(self.model),
            "messages": messages,
            "stream": True,
            "stream_options": STREAM_OPTIONS,
            **extra,
        }
        calls: dict[int, list[str]] = {}
        answering = False  # the server took the call: from here on it costs something
        with self._span() as span:
            try:
                response, deadline = await self._open("/chat/completions", body)
                answering = True
                try:
                    reading = events(response.content.iter_any())
                    while True:
                        try:
                            async with asyncio.timeout_at(deadline):
                                data = await anext(reading)
                        except StopAsyncIteration:
                            break
                        except TimeoutError:
                            raise CallTimeout(
                                f"the reply did not end within {self.timeout:g}s"
                            ) from None
                        if (model := data.get("model")) and not result.model:
                            result.model = model
                        if rules.reported(usage := data.get("usage")):
                            result.usage = rules.usage_of(usage, result.model or self.model)
                        for choice in data.get("choices") or ():
                            delta = choice.get("delta") or {}
                            if tool_calls := delta.get("tool_calls"):
                                gather_tool_calls(calls, tool_calls)
                            if choice.get("finish_reason"):
                                result.finish_reason = choice["finish_reason"]
                            text = delta.get("content")
                            if text:
                                result.text += text
                                yield text
                finally:
                    # A body not read to its end closes its connection, which stops the model;
                    # one read to its end leaves it for the next call.
                    response.release()
            except CALL_ERRORS as exc:
                if answering:  # failed or timed out midway: what it spent so far is counted
                    self._spent_so_far(result, calls, messages, body)
                raise self._fail(exc, span, started) from exc
            except (GeneratorExit, asyncio.CancelledError):  # stopped reading: it still spent
                self._streamed(result, calls, span, started, messages, body, whole=False)
                raise
            self._streamed(result, calls, span, started, messages, body)

    def _streamed(
        self,
        result: StreamResult,
        calls: dict[int, list[str]],
        span: trace.Span,
        started: float,
        messages: Messages,
        body: dict[str, Any],
        *,
        whole: bool = True,
    ) -> None:
        """A stream that ended (`whole`: read to its end; else closed early by the caller):
        its tool calls, model and usage, recorded."""
        if whole:  # a stream cut short says nothing of whether the server reports usage
            MODES.usage_seen(self.key, result.usage.calls > 0)
        self._spent_so_far(result, calls, messages, body)
        span.set_attribute("gen_ai.response.model", result.model)
        self._record(result.usage, started, span)
        self._cut(result.finish_reason, body, result.usage.output_tokens)

    def _spent_so_far(
        self,
        result: StreamResult,
        calls: dict[int, list[str]],
        messages: Messages,
        body: dict[str, Any],
    ) -> None:
        """Fill in what the call made and spent: its tool calls, its model, and its usage, the
        server's if it reported it, else counted from what was sent and what came back."""
        result.tool_calls = [
            ToolCall(id=parts[0], name=parts[1], arguments=parts[2])
            for _, parts in sorted(calls.items())
        ]
        result.model = result.model or self.model
        if result.usage.calls == 0:  # the server reported none: counted here
            said = result.text + "".join(c.arguments for c in result.tool_calls)
            result.usage = rules.counted(result.model, messages, said, body)
        rules.tally(result.usage)

    async def embed(self, texts: list[str]) -> list[list[float]]:
        self._require()
        started = time.perf_counter()
        with self._span("embeddings") as span:
            try:
                answer = await self._answer(
                    "/embeddings", {"model": self.model, "input": texts, "encoding_format": "float"}
                )
                data = orjson.loads(answer)
                rows = sorted(data["data"], key=lambda d: d["index"])
                vectors = [[float(x) for x in row["embedding"]] for row in rows]
            except CALL_ERRORS as exc:
                raise self._fail(exc, span, started) from exc
            tokens = int((data.get("usage") or {}).get("prompt_tokens") or 0)
            self._record(Usage(input_tokens=tokens, calls=1), started, span)
            return vectors
