"""The one way services talk to a model: the `openai` SDK against any compatible endpoint.

- Structured outputs use OpenAI's `json_schema` response format built from a Pydantic model;
  the reply is validated, and an invalid reply is retried once with the validation error.
- 429, 5xx, connection errors and timeouts are retried by the SDK with exponential back-off,
  honouring `Retry-After`; every call has a timeout. Token usage is returned with each result.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import openai
from openai.types.chat import (
    ChatCompletionAssistantMessageParam,
    ChatCompletionMessage,
    ChatCompletionMessageParam,
)
from opentelemetry import trace
from pydantic import BaseModel, ValidationError

from contracts import Usage
from services.runtime.errors import LLMInvalidOutput, LLMNotConfigured, LLMUnavailable
from services.runtime.metrics import LLM_ERRORS, LLM_LATENCY, LLM_TOKENS
from services.runtime.settings import LLMConfig

T = TypeVar("T", bound=BaseModel)
Messages = list[ChatCompletionMessageParam]

_tracer = trace.get_tracer("sidekick.llm")


@dataclass
class Structured(Generic[T]):
    value: T
    usage: Usage
    model: str


@dataclass
class Completion:
    text: str
    usage: Usage
    model: str


@dataclass(frozen=True)
class ToolCall:
    """One function call the model asked for; `arguments` is JSON text as the model wrote it."""

    id: str
    name: str
    arguments: str


@dataclass
class ChatReply:
    """One raw assistant turn: its text, the tool calls it asked for, and usage."""

    message: ChatCompletionMessage
    content: str
    tool_calls: list[ToolCall]
    finish_reason: str | None
    usage: Usage
    model: str

    def as_param(self) -> ChatCompletionAssistantMessageParam:
        """The turn as a message to send back with the tool results that answer it."""
        param: ChatCompletionAssistantMessageParam = {
            "role": "assistant",
            "content": self.content or None,
        }
        if self.tool_calls:
            param["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in self.tool_calls
            ]
        return param


@dataclass
class StreamResult:
    """Filled in as a stream is consumed; complete once iteration ends."""

    text: str = ""
    usage: Usage = field(default_factory=Usage)
    model: str = ""


def strict_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON Schema in the subset OpenAI's strict mode accepts: every object closed,
    every property required, no defaults."""
    schema = model.model_json_schema()

    def fix(node: Any) -> None:
        if isinstance(node, dict):
            node.pop("default", None)
            node.pop("title", None)
            if node.get("type") == "object" and "properties" in node:
                node["additionalProperties"] = False
                node["required"] = list(node["properties"])
            for value in node.values():
                fix(value)
        elif isinstance(node, list):
            for item in node:
                fix(item)

    fix(schema)
    return schema


@functools.cache
def response_format(model: type[BaseModel]) -> dict[str, Any]:
    """Built once per schema (generating it costs ~0.4 ms, on every structured call before);
    the returned dict is shared, so callers must not change it."""
    return {
        "type": "json_schema",
        "json_schema": {"name": model.__name__, "schema": strict_schema(model), "strict": True},
    }


def _usage(raw: Any) -> Usage:
    if raw is None:
        return Usage(calls=1)
    return Usage(
        input_tokens=raw.prompt_tokens or 0, output_tokens=raw.completion_tokens or 0, calls=1
    )


class LLMClient:
    """A role's model endpoint. Create once per process and share."""

    def __init__(self, config: LLMConfig, *, timeout: float, max_retries: int) -> None:
        self.config = config
        self.role = config.role
        self.model = config.model
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

    def _record(self, usage: Usage, started: float, outcome: str, span: trace.Span) -> None:
        LLM_LATENCY.labels(self.role, self.model, outcome).observe(time.perf_counter() - started)
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
        where = self.config.base_url or "the default OpenAI endpoint"
        return LLMUnavailable(
            self.role, self.model, f"The {self.role} model ({self.model} at {where}) failed: {exc}"
        )

    async def complete(self, messages: Messages, **extra: Any) -> Completion:
        reply = await self.chat(messages, **extra)
        return Completion(text=reply.content, usage=reply.usage, model=reply.model)

    async def chat(self, messages: Messages, **extra: Any) -> ChatReply:
        """One raw model turn (e.g. with `tools=`): the message as the SDK gave it, with its
        function tool calls parsed, so a caller can run them and continue the conversation."""
        client = self._require()
        started = time.perf_counter()
        with self._span() as span:
            try:
                resp = await client.chat.completions.create(
                    model=self.model, messages=messages, **extra
                )
            except openai.OpenAIError as exc:
                raise self._fail(exc, span, started) from exc
            usage = _usage(resp.usage)
            span.set_attribute("gen_ai.response.model", resp.model or self.model)
            if not resp.choices:
                raise self._fail(ValueError("the reply had no choices"), span, started)
            choice = resp.choices[0]
            if choice.finish_reason:
                span.set_attribute("gen_ai.response.finish_reasons", [choice.finish_reason])
            self._record(usage, started, "ok", span)
            calls = [
                ToolCall(id=str(call.id), name=str(fn.name), arguments=str(fn.arguments or ""))
                for call in choice.message.tool_calls or []
                if (fn := getattr(call, "function", None)) is not None
            ]
            return ChatReply(
                message=choice.message,
                content=choice.message.content or "",
                tool_calls=calls,
                finish_reason=choice.finish_reason,
                usage=usage,
                model=resp.model or self.model,
            )

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """Embeddings of `texts`, in order."""
        client = self._require()
        started = time.perf_counter()
        with self._span("embeddings") as span:
            try:
                resp = await client.embeddings.create(model=self.model, input=texts)
            except openai.OpenAIError as exc:
                raise self._fail(exc, span, started) from exc
            tokens = resp.usage.prompt_tokens if resp.usage else 0
            self._record(Usage(input_tokens=tokens, calls=1), started, "ok", span)
            return [d.embedding for d in sorted(resp.data, key=lambda d: d.index)]

    async def structured(self, messages: Messages, schema: type[T]) -> Structured[T]:
        """Ask for `schema` as JSON; retry once with the validation error if the reply is bad."""
        fmt = response_format(schema)
        first = await self.complete(messages, response_format=fmt)
        try:
            return Structured(schema.model_validate_json(first.text), first.usage, first.model)
        except ValidationError as exc:
            error = _short_error(exc)
        retry_messages: Messages = [
            *messages,
            {"role": "assistant", "content": first.text},
            {
                "role": "user",
                "content": (
                    f"Your reply was not valid: {error}. Reply again with only a JSON object "
                    f"matching the {schema.__name__} schema."
                ),
            },
        ]
        second = await self.complete(retry_messages, response_format=fmt)
        usage = first.usage + second.usage
        try:
            return Structured(schema.model_validate_json(second.text), usage, second.model)
        except ValidationError as exc:
            LLM_ERRORS.labels(self.role, self.model, "invalid_output").inc()
            raise LLMInvalidOutput(
                self.role,
                self.model,
                f"The {self.role} model gave invalid {schema.__name__} output twice: "
                f"{_short_error(exc)}",
                raw=second.text,
            ) from exc

    async def stream(self, messages: Messages, result: StreamResult) -> AsyncGenerator[str, None]:
        """Yield text deltas as they arrive; `result` holds the full text and usage after."""
        client = self._require()
        started = time.perf_counter()
        with self._span() as span:
            try:
                chunks = await client.chat.completions.create(
                    model=self.model,
                    messages=messages,
                    stream=True,
                    stream_options={"include_usage": True},
                )
                async with chunks:
                    async for chunk in chunks:
                        if chunk.usage is not None:
                            result.usage = _usage(chunk.usage)
                        result.model = chunk.model or result.model
                        for choice in chunk.choices:
                            delta = choice.delta.content
                            if delta:
                                result.text += delta
                                yield delta
            except openai.OpenAIError as exc:
                raise self._fail(exc, span, started) from exc
            if result.usage.calls == 0:
                result.usage = Usage(calls=1)
            span.set_attribute("gen_ai.response.model", result.model or self.model)
            self._record(result.usage, started, "ok", span)


def _short_error(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(p) for p in err["loc"]) or "(root)"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False)
