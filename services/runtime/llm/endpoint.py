"""One model endpoint (base URL, key, model) and the raw calls to it, each measured and traced.

429, 5xx, connection errors and timeouts are retried by the `openai` SDK with exponential
back-off, honouring `Retry-After`; every call has a timeout. What is left after the retries
becomes `LLMUnavailable`, marked transient (a fallback endpoint may help) or not (the server
answered 4xx: it would answer the same again).
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator
from typing import Any

import openai
from opentelemetry import trace

from contracts import Usage
from services.runtime.errors import LLMNotConfigured, LLMUnavailable
from services.runtime.llm.types import ChatReply, Messages, StreamResult, ToolCall
from services.runtime.metrics import LLM_ERRORS, LLM_LATENCY, LLM_TOKENS
from services.runtime.settings import LLMConfig

_tracer = trace.get_tracer("sidekick.llm")


def usage_of(raw: Any, model: str) -> Usage:
    if raw is None:
        return Usage.of_call(model)
    return Usage.of_call(model, raw.prompt_tokens or 0, raw.completion_tokens or 0)


class Endpoint:
    """Create once per process and share (one connection pool)."""

    def __init__(self, config: LLMConfig, *, timeout: float, max_retries: int) -> None:
        self.config = config
        self.role = config.role
        self.model = config.model
        self.key = (config.base_url or "https://api.openai.com/v1", config.model)
        self._client: openai.AsyncOpenAI | None = None
        if config.configured:
            self._client = openai.AsyncOpenAI(
                base_url=config.base_url,
                # Local servers (Ollama, vLLM, llama.cpp) accept any key.
                api_key=config.api_key or "not-needed",
                timeout=timeout,
                max_retries=max_retries,
            )

    @property
    def configured(self) -> bool:
        return self._client is not None

    def _require(self) -> openai.AsyncOpenAI:
        if self._client is None:
            raise LLMNotConfigured(self.role)
        return self._client

    def _record(self, usage: Usage, started: float, span: trace.Span) -> None:
        LLM_LATENCY.labels(self.role, self.model, "ok").observe(time.perf_counter() - started)
        LLM_TOKENS.labels(self.role, self.model, "input").inc(usage.input_tokens)
        LLM_TOKENS.labels(self.role, self.model, "output").inc(usage.output_tokens)
        span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)

    def _span(self, operation: str = "chat") -> Any:
        return _tracer.start_as_current_span(
            f"{operation} {self.model}",
            kind=trace.SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": operation,
                "gen_ai.system": "openai",
                "gen_ai.request.model": self.model,
                "sidekick.role": self.role,
            },
        )

    def _fail(self, exc: Exception, span: trace.Span, started: float) -> LLMUnavailable:
        kind = type(exc).__name__
        LLM_ERRORS.labels(self.role, self.model, kind).inc()
        LLM_LATENCY.labels(self.role, self.model, "error").observe(time.perf_counter() - started)
        span.set_status(trace.Status(trace.StatusCode.ERROR, kind))
        status = getattr(exc, "status_code", None)
        transient = status is None or status == 429 or status >= 500
        return LLMUnavailable(
            self.role,
            self.model,
            f"The {self.role} model ({self.model} at {self.config.where}) failed: {exc}",
            transient=transient,
            status=status,
        )

    async def chat(self, messages: Messages, **extra: Any) -> ChatReply:
        client = self._require()
        started = time.perf_counter()
        with self._span() as span:
            try:
                resp = await client.chat.completions.create(
                    model=self.model, messages=messages, **extra
                )
            except openai.OpenAIError as exc:
                raise self._fail(exc, span, started) from exc
            model = resp.model or self.model
            usage = usage_of(resp.usage, model)
            span.set_attribute("gen_ai.response.model", model)
            if not resp.choices:
                raise self._fail(ValueError("the reply had no choices"), span, started)
            choice = resp.choices[0]
            if choice.finish_reason:
                span.set_attribute("gen_ai.response.finish_reasons", [choice.finish_reason])
            self._record(usage, started, span)
            calls = [
                ToolCall(id=str(call.id), name=str(fn.name), arguments=str(fn.arguments or ""))
                for call in choice.message.tool_calls or []
                if (fn := getattr(call, "function", None)) is not None
            ]
            return ChatReply(
                content=choice.message.content or "",
                tool_calls=calls,
                finish_reason=choice.finish_reason,
                usage=usage,
                model=model,
            )

    async def stream(
        self, messages: Messages, result: StreamResult, **extra: Any
    ) -> AsyncGenerator[str, None]:
        client = self._require()
        started = time.perf_counter()
        with self._span() as span:
            try:
                chunks = await client.chat.completions.create(
                    model=self.model,
                    messages=messages,
                    stream=True,
                    stream_options={"include_usage": True},
                    **extra,
                )
                async with chunks:
                    async for chunk in chunks:
                        result.model = chunk.model or result.model
                        if chunk.usage is not None:
                            result.usage = usage_of(chunk.usage, result.model or self.model)
                        for choice in chunk.choices:
                            delta = choice.delta.content
                            if delta:
                                result.text += delta
                                yield delta
            except openai.OpenAIError as exc:
                raise self._fail(exc, span, started) from exc
            result.model = result.model or self.model
            if result.usage.calls == 0:
                result.usage = Usage.of_call(result.model)
            span.set_attribute("gen_ai.response.model", result.model)
            self._record(result.usage, started, span)

    async def embed(self, texts: list[str]) -> list[list[float]]:
        client = self._require()
        started = time.perf_counter()
        with self._span("embeddings") as span:
            try:
                resp = await client.embeddings.create(model=self.model, input=texts)
            except openai.OpenAIError as exc:
                raise self._fail(exc, span, started) from exc
            tokens = resp.usage.prompt_tokens if resp.usage else 0
            self._record(Usage(input_tokens=tokens, calls=1), started, span)
            return [d.embedding for d in sorted(resp.data, key=lambda d: d.index)]
