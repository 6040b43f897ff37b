"""Model calls against a real OpenAI-compatible server (llama-cpp-python serving the tiny local
model), where each finding of issue 26 was seen: no max_tokens, a timeout that did not stop the
server, a capability answer (HTTP 500) retried as transient, no usage in streams. Assertions are
on shapes, states and limits, never on the model's wording."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from pydantic import BaseModel, Field

from services.runtime.base.errors import LLMInvalidOutput, LLMUnavailable
from services.runtime.llm.client import LLMClient
from services.runtime.llm.modes import MODES
from services.runtime.llm.types import Messages, StreamResult
from tests.support.realmodel import RealModel

pytestmark = pytest.mark.real_model

# About 500 tokens from this model: some 20 s of one slot's time on 2 busy cores.
LONG: Messages = [
    {"role": "user", "content": "Write a long story about a brave knight and a dragon."}
]
# The longest a tiny call may wait once the server is free (it takes 1-3 s on 2 busy cores);
# behind an abandoned LONG it would wait the rest of those ~20 s.
FREE = 10.0
SHORT: Messages = [{"role": "user", "content": "Say OK."}]


class Answer(BaseModel):
    """A short answer."""

    answer: str = Field(description="The answer, in a few words.")
    confident: bool = Field(description="Whether you are sure.")


async def drain(llm: LLMClient, messages: Messages, result: StreamResult) -> str:
    async for _ in llm.stream(messages, result):
        pass
    return result.text


async def test_every_call_sends_its_max_tokens_and_a_reply_cut_there_is_reported(
    real_model: RealModel, caplog: pytest.LogCaptureFixture
) -> None:
    llm = LLMClient(real_model.config(max_tokens_answer=12), timeout=60, max_retries=0)
    result = StreamResult()
    with caplog.at_level(logging.WARNING, "sidekick.llm"):
        await drain(llm, LONG, result)
    assert result.finish_reason == "length", "the server stopped at the limit Sidekick sent"
    assert any("max_tokens=12" in r.getMessage() for r in caplog.records), "reported as such"

    short = LLMClient(real_model.config(max_tokens_short=4), timeout=60, max_retries=0)
    with pytest.raises(LLMInvalidOutput) as info:
        await short.structured(LONG, Answer)
    assert "max_tokens=4" in str(info.value), "a structured reply cut short says why"


async def test_the_timeout_bounds_the_whole_call_and_frees_the_server(
    real_model: RealModel,
) -> None:
    """A streamed reply that would run for minutes ends at the timeout, and its request is
    closed: the next call does not queue behind the abandoned generation (one slot)."""
    slow = LLMClient(
        real_model.config(max_tokens_answer=3000, stream_calls=True), timeout=3, max_retries=0
    )
    started = time.monotonic()
    with pytest.raises(LLMUnavailable) as info:
        await slow.complete(LONG)
    took = time.monotonic() - started
    assert "3s" in str(info.value) and took < 8, f"the call ran {took:.1f}s past a 3 s timeout"

    quick = LLMClient(real_model.config(max_tokens_answer=4), timeout=60, max_retries=0)
    started = time.monotonic()
    await quick.complete(SHORT)
    waited = time.monotonic() - started
    assert waited < FREE, f"the next call waited {waited:.1f}s: the server kept generating"


async def test_a_capability_answer_switches_mode_at_once_without_retries(
    real_model: RealModel,
) -> None:
    """llama.cpp answers a json_schema it cannot take with HTTP 500 naming response_format:
    one such answer, then tools mode, however many retries are allowed."""
    MODES.forget()
    llm = LLMClient(real_model.config(max_tokens_short=200), timeout=60, max_retries=3)
    before = real_model.answered(500)
    got = await llm.structured(SHORT, Answer)
    assert real_model.answered(500) - before == 1, "the refusal was asked once, not retried"
    assert got.mode == "tools" and llm.mode() == "tools"
    assert isinstance(got.value, Answer)


@pytest.mark.parametrize("mode", ["tools", "json_object"])
async def test_structured_output_is_valid_in_each_mode_the_server_takes(
    real_model: RealModel, mode: str
) -> None:
    llm = LLMClient(
        real_model.config(structured=mode, max_tokens_short=200), timeout=60, max_retries=0
    )
    try:
        got = await llm.structured(SHORT, Answer)
    except LLMInvalidOutput as exc:  # a 135M model may still write bad JSON twice: said so
        assert exc.mode == mode and exc.raw is not None
        return
    assert got.mode == mode and isinstance(got.value, Answer)


async def test_usage_the_server_does_not_report_is_counted_and_marked(
    real_model: RealModel,
) -> None:
    llm = LLMClient(real_model.config(max_tokens_answer=16), timeout=60, max_retries=0)
    result = StreamResult()
    text = await drain(llm, SHORT, result)
    usage = result.usage
    assert usage.calls == 1 and usage.counted_calls == 1, "marked as counted, not reported"
    assert usage.input_tokens > 0 and usage.output_tokens >= (1 if text else 0)
    assert usage.models[result.model].input_tokens == usage.input_tokens


@pytest.mark.parametrize("how", ["closed", "cancelled"])
async def test_a_stream_stopped_early_stops_the_servers_generation(
    real_model: RealModel, how: str
) -> None:
    """A stream whose reader closes it (the frontline once it has what it needs) or whose task
    is cancelled (a cancelled request) closes its HTTP request: the next call is answered at
    once, not after the abandoned reply's hundreds of tokens."""
    llm = LLMClient(real_model.config(max_tokens_answer=3000), timeout=120, max_retries=0)
    result = StreamResult()
    if how == "closed":
        stream = llm.stream(LONG, result)
        async for _ in stream:
            if len(result.text) > 20:
                break
        await stream.aclose()
    else:
        started_writing = asyncio.Event()

        async def read() -> None:
            async for _ in llm.stream(LONG, result):
                if len(result.text) > 20:
                    started_writing.set()

        task = asyncio.create_task(read())
        await asyncio.wait_for(started_writing.wait(), 60)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert 20 < len(result.text) < 2000, "stopped early, mid-reply"
    quick = LLMClient(real_model.config(max_tokens_answer=4), timeout=60, max_retries=0)
    started = time.monotonic()
    await asyncio.wait_for(quick.complete(SHORT), 60)
    waited = time.monotonic() - started
    assert waited < FREE, f"the next call waited {waited:.1f}s: the server went on generating"
