"""A role's model: its endpoint, the fallback endpoint tried when that one fails after its
retries, and structured output in whatever mode each endpoint takes (modes.py)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, Literal, TypeVar

from pydantic import ValidationError

from contracts import Usage
from services.runtime.base.errors import BudgetSpent, LLMInvalidOutput, LLMUnavailable
from services.runtime.base.metrics import LLM_ERRORS
from services.runtime.base.settings import LLMConfig, Role, Settings, StructuredMode
from services.runtime.llm import choice as choices
from services.runtime.llm import modes
from services.runtime.llm.calls import call_maximum
from services.runtime.llm.choice import Choice, ChoiceResult, Convention
from services.runtime.llm.endpoint import Endpoint
from services.runtime.llm.modes import MODES
from services.runtime.llm.schema import parse, short_error
from services.runtime.llm.types import (
    BudgetGuard,
    ChatReply,
    Completion,
    Messages,
    StreamResult,
    Structured,
    T,
)

log = logging.getLogger("sidekick.llm")
R = TypeVar("R")
# How long a reply may be: `short` for routing, decisions, verdicts and plans, `answer` for what
# a person reads (SIDEKICK_LLM_MAX_TOKENS_SHORT / _ANSWER).
Length = Literal["short", "answer"]


class LLMClient:
    """A role's model endpoint(s). Create once per process and share."""

    def __init__(self, config: LLMConfig, *, timeout: float, max_retries: int) -> None:
        self.config = config
        self.role = config.role
        self.model = config.model
        self.primary = Endpoint(config, timeout=timeout, max_retries=max_retries)
        self.fallback: Endpoint | None = None
        if config.fallback is not None and config.fallback.configured:
            self.fallback = Endpoint(config.fallback, timeout=timeout, max_retries=max_retries)

    @classmethod
    def for_role(cls, settings: Settings, role: Role) -> LLMClient:
        """`role`'s client, with the process's timeout and retries."""
        return cls(
            settings.llm(role), timeout=settings.llm_timeout, max_retries=settings.llm_max_retries
        )

    @property
    def configured(self) -> bool:
        return self.primary.configured

    async def _with_fallback(self, call: Callable[[Endpoint], Awaitable[R]]) -> R:
        try:
            return await call(self.primary)
        except LLMUnavailable as exc:
            if self.fallback is None or not exc.transient:
                raise
            self._warn_fallback(self.fallback, "trying")
            try:
                return await call(self.fallback)
            except LLMUnavailable as second:
                raise LLMUnavailable(
                    self.role,
                    self.model,
                    f"{exc} — and the fallback: {second}",
                    transient=second.transient,
                    status=second.status,
                ) from second

    def limited(self, extra: dict[str, Any], length: Length) -> dict[str, Any]:
        """`extra` with the `max_tokens` that fits `length`, unless the caller chose one."""
        limit = self.config.max_tokens_short if length == "short" else self.config.max_tokens_answer
        if limit <= 0 or "max_tokens" in extra:
            return extra
        return {**extra, "max_tokens": limit}

    def _checked(
        self,
        budget: BudgetGuard | None,
        ep: Endpoint,
        used: Usage,
        messages: Messages,
        extra: dict[str, Any],
    ) -> None:
        """Raise BudgetSpent when `budget` refuses the call about to be sent (never one more)."""
        if budget is None:
            return
        note = budget(used, call_maximum(messages, extra))
        if note is not None:
            raise BudgetSpent(self.role, ep.model, note, used)

    async def chat(
        self, messages: Messages, *, budget: BudgetGuard | None = None, **extra: Any
    ) -> ChatReply:
        """One raw model turn (e.g. with `tools=`), with its function tool calls parsed, so a
        caller can run them and continue the conversation. `budget` is consulted before the
        call, and before its fallback's."""
        extra = self.limited(extra, "answer")

        async def one(ep: Endpoint) -> ChatReply:
            self._checked(budget, ep, Usage(), messages, extra)
            return await ep.chat(messages, **extra)

        return await self._with_fallback(one)

    async def complete(
        self, messages: Messages, *, budget: BudgetGuard | None = None, **extra: Any
    ) -> Completion:
        reply = await self.chat(messages, budget=budget, **extra)
        return Completion(text=reply.content, usage=reply.usage, model=reply.model)

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """Embeddings of `texts`, in order (no fallback: another model's vectors would not be
        comparable with the ones already stored)."""
        return await self.primary.embed(texts)

    def mode(self, endpoint: Endpoint | None = None) -> StructuredMode:
        """The structured-output mode the next call to `endpoint` (default: primary) uses."""
        ep = endpoint or self.primary
        return MODES.mode(ep.key, ep.config.structured)

    async def structured(
        self,
        messages: Messages,
        schema: type[T],
        *,
        length: Length = "short",
        budget: BudgetGuard | None = None,
    ) -> Structured[T]:
        """`schema` as JSON in the strongest mode the endpoint takes; validated, and retried
        once with the validation error if the reply is bad. `length`: a short reply (a
        decision, a verdict, a plan) or an answer a person reads (a report, a mail). `budget`
        is consulted before every HTTP call this makes (the first, a repair, a fallback's)."""
        return await self._with_fallback(
            lambda ep: self._structured(ep, messages, schema, length, budget)
        )

    async def _structured(
        self,
        ep: Endpoint,
        messages: Messages,
        schema: type[T],
        length: Length,
        budget: BudgetGuard | None,
    ) -> Structured[T]:
        mode = self.mode(ep)
        while True:
            asked, extra = modes.request(mode, schema, messages)
            extra = self.limited(extra, length)
            self._checked(budget, ep, Usage(), asked, extra)
            try:
                first = await ep.chat(asked, **extra)
            except LLMUnavailable as exc:
                nxt = self._step_down(ep, mode, exc)
                if nxt is None:
                    raise
                mode = nxt
                continue
            break
        text = modes.reply_text(mode, schema, first)
        try:
            return Structured(parse(schema, text), first.usage, first.model, mode)
        except ValidationError as exc:
            error = short_error(exc)
            if _cut_short(first, extra):  # a repair would be cut short the same way
                raise self._invalid(
                    ep,
                    f"structured output mode {mode}",
                    f"a {schema.__name__} cut off at max_tokens={extra.get('max_tokens')}: {error}",
                    raw=text,
                    mode=mode,
                ) from exc
        repair = modes.repair(mode, schema, asked, text, error)
        self._checked(budget, ep, first.usage, repair, extra)  # the repair is a call too
        second = await ep.chat(repair, **extra)
        usage = first.usage + second.usage
        text = modes.reply_text(mode, schema, second)
        try:
            return Structured(parse(schema, text), usage, second.model, mode)
        except ValidationError as exc:
            raise self._invalid(
                ep,
                f"structured output mode {mode}",
                f"invalid {schema.__name__} output twice: {short_error(exc)}",
                raw=text,
                mode=mode,
            ) from exc

    def _invalid(
        self, ep: Endpoint, asked: str, gave: str, *, raw: str, mode: str
    ) -> LLMInvalidOutput:
        """The error for a reply still unusable after its one retry, counted in the metrics."""
        LLM_ERRORS.labels(self.role, ep.model, "invalid_output").inc()
        message = f"The {self.role} model ({ep.model}, {asked}) gave {gave}"
        return LLMInvalidOutput(self.role, ep.model, message, raw=raw, mode=mode)

    def _step_down(
        self, ep: Endpoint, mode: StructuredMode, exc: LLMUnavailable
    ) -> StructuredMode | None:
        """The next mode if `exc` says the server lacks `mode` (never past a forced mode)."""
        if ep.config.structured is not None or not modes.refuses(mode, exc.status, str(exc)):
            return None
        return MODES.step_down(ep.key, mode, str(exc))

    def _warn_fallback(self, fallback: Endpoint, how: str) -> None:
        log.warning(
            "%s: %s failed after its retries; %s the fallback %s at %s",
            self.role,
            self.model,
            how,
            fallback.model,
            fallback.config.where,
        )

    async def _deltas_with_fallback(
        self, deltas: Callable[[Endpoint], AsyncGenerator[str, None]], how: str
    ) -> AsyncGenerator[str, None]:
        """`deltas(endpoint)` of the primary; of the fallback only if the primary failed (after
        its retries, for a transient reason) before its first delta."""
        started = False
        try:
            # Closed with this one (a caller that stops reading), so that the call's stream is
            # closed, and what it spent is added, before the caller goes on.
            async with contextlib.aclosing(deltas(self.primary)) as primary:
                async for delta in primary:
                    started = True
                    yield delta
            return
        except LLMUnavailable as exc:
            if started or self.fallback is None or not exc.transient:
                raise
            self._warn_fallback(self.fallback, how)
        async with contextlib.aclosing(deltas(self.fallback)) as fallback:
            async for delta in fallback:
                yield delta

    def stream(
        self, messages: Messages, result: StreamResult, **extra: Any
    ) -> AsyncGenerator[str, None]:
        """Yield text deltas as they arrive; `result` holds the full text and usage after. The
        fallback takes over only if the primary failed before its first delta."""
        extra = self.limited(extra, "answer")
        return self._deltas_with_fallback(
            lambda ep: ep.stream(messages, result, **extra), "streaming from"
        )

    def answer_or_call(
        self,
        build: Callable[[Convention], Messages],
        choice: Choice,
        result: ChoiceResult,
    ) -> AsyncGenerator[str, None]:
        """One streamed call that answers (text deltas are yielded as they come) or calls
        `choice` instead (`result.called` holds its argument once iteration ends), in the
        convention the endpoint takes (choice.py). `build(convention)` gives the messages.
        An empty reply is retried once; the fallback takes over only before the first delta."""
        return self._deltas_with_fallback(
            lambda ep: self._answer_or_call(ep, build, choice, result), "answering from"
        )

    async def _answer_or_call(
        self,
        ep: Endpoint,
        build: Callable[[Convention], Messages],
        choice: Choice,
        result: ChoiceResult,
    ) -> AsyncGenerator[str, None]:
        how = choices.convention(self.mode(ep))
        empty = 0
        while True:
            messages = build(how)
            if empty:
                messages = choices.nudge(choice, how, messages)
            asked, extra = choices.request(choice, how, messages)
            extra = self.limited(extra, "answer")
            raw = StreamResult()
            marker = choices.Marker(choice) if how == "marker" else None
            result.convention = how
            said = False
            try:
                async with contextlib.aclosing(ep.stream(asked, raw, **extra)) as deltas:
                    async for delta in deltas:
                        out = marker.feed(delta) if marker is not None else delta
                        if out:
                            said = True
                            result.text += out
                            yield out
                        if marker is not None and marker.line_done:
                            break  # closing the stream stops the model: the rest is unused
            except LLMUnavailable as exc:
                if said or how != "tools" or not self._refuses_tools(ep, exc):
                    raise
                how = "marker"
                continue
            finally:
                # What the call spent, however it ended: answered, closed early by the caller
                # (a cancel, a client gone), cancelled, timed out or failed midway (endpoint.py
                # counts a cut call from what was sent and received, marked as counted).
                result.usage = result.usage + raw.usage
                result.model = raw.model or result.model or ep.model
            tail = marker.end() if marker is not None else ""
            if tail:
                result.text += tail
                yield tail
            called = marker.called if marker is not None else choices.argument_of(choice, raw)
            if called is not None:
                result.called = called
                return
            if result.text.strip():
                return
            empty += 1
            if empty > 1:
                raise self._invalid(
                    ep,
                    f"convention {how}",
                    f"an empty reply twice: neither an answer nor a call of {choice.name}",
                    raw="",
                    mode=how,
                )

    def _refuses_tools(self, ep: Endpoint, exc: LLMUnavailable) -> bool:
        """Whether `exc` says the server lacks tool calling; if so, remembered (never past a
        forced mode): the marker convention is used from now on."""
        if ep.config.structured is not None or not modes.refuses("tools", exc.status, str(exc)):
            return False
        MODES.step_down(ep.key, "tools", str(exc))
        return True


def _cut_short(reply: ChatReply, extra: dict[str, Any]) -> bool:
    """Whether `reply` stopped at its max_tokens: the server says so, or (llama.cpp names a
    forced tool call's end `tool_calls` whatever stopped it) it used every token allowed."""
    limit = extra.get("max_tokens")
    used_all = isinstance(limit, int) and reply.usage.output_tokens >= limit
    return reply.finish_reason == "length" or used_all
