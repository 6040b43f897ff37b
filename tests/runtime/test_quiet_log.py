"""A healthy system's log is quiet: `sidekick up` (real processes, embedded nats-server, the fake
model) idles, answers a few requests and is stopped by a terminal's Ctrl-C or by SIGTERM, and
its whole output has no ERROR line and no traceback. With SIDEKICK_LOG_FORMAT=json every line
is one JSON object. And the formatters themselves: request id, trace id, one line per problem."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider

from services.runtime.base.logs import JsonFormatter, TextFormatter, _Context, request_context
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.harness import Client
from tests.support.upproc import Up

# Idling is what this test is about: past a standing pull's idle heartbeat (5 s,
# services/runtime/bus/consumer.py) and several of its connection checks (the fetch loop it
# replaced logged an ERROR ~3 s after start), so it waits for the clock on purpose.
IDLE_SECONDS = 7.0
JSON_KEYS = {"timestamp", "level", "service", "request_id", "trace_id", "message"}


async def _idle_ask_stop(up: Up, stop_with: signal.Signals) -> str:
    up.wait_for("Sidekick is up")
    await asyncio.sleep(IDLE_SECONDS)
    async with Client(up.ws_url) as client:
        assert (await client.ask("hello")).text
        assert (await client.ask("search the news")).answer.startswith("Answer to:")
    async with Client(up.ws_url, events=True) as client:
        assert (await client.ask("route this one too")).end["status"] == "completed"
    await asyncio.sleep(IDLE_SECONDS / 2)
    assert await asyncio.to_thread(up.interrupt, stop_with) == 0
    return up.output()


@pytest.mark.parametrize("stop_with", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
async def test_a_healthy_up_idles_answers_and_stops_without_an_error_or_traceback(
    tmp_path: Path, fake_llm: FakeOpenAI, stop_with: signal.Signals
) -> None:
    up = Up(tmp_path, fake_llm.base_url)
    try:
        out = await _idle_ask_stop(up, stop_with)
    finally:
        up.kill()
    problems = [line for line in out.splitlines() if " ERROR " in line or "Traceback" in line]
    assert not problems, out[-6000:]
    assert "KeyboardInterrupt" not in out and "shutdown failed" not in out, out[-6000:]
    assert out.rstrip().endswith("sidekick.up: stopped"), out[-2000:]


async def test_with_json_logging_every_line_of_up_is_one_json_object(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    up = Up(tmp_path, fake_llm.base_url, env={"SIDEKICK_LOG_FORMAT": "json"})
    try:
        out = await _idle_ask_stop(up, signal.SIGTERM)
    finally:
        up.kill()
    entries = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert all(set(e) >= JSON_KEYS for e in entries), entries[:3]
    assert {e["service"] for e in entries} >= {"up", "gateway", "frontline", "workers"}
    assert not [e for e in entries if e["level"] == "ERROR" or "exception" in e]
    assert any(e["message"].startswith("Sidekick is up") for e in entries)


def _record(level: int, message: str, exc: BaseException | None = None) -> logging.LogRecord:
    exc_info = (type(exc), exc, exc.__traceback__) if exc is not None else None
    record = logging.LogRecord("sidekick.test", level, __file__, 1, message, (), exc_info)
    assert _Context("frontline").filter(record)
    return record


def test_a_json_line_names_the_service_request_and_trace() -> None:
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("hop") as span, request_context("req-42"):
        line = JsonFormatter().format(_record(logging.WARNING, "model slow"))
    entry = json.loads(line)
    assert "\n" not in line
    assert entry["service"] == "frontline" and entry["request_id"] == "req-42"
    assert entry["trace_id"] == format(span.get_span_context().trace_id, "032x")
    assert entry["level"] == "WARNING" and entry["message"] == "model slow"


def test_an_expected_failure_is_one_text_line_naming_the_request_and_the_exception() -> None:
    try:
        raise ConnectionError("refused")
    except ConnectionError as exc:
        caught = exc
    with request_context("req-7"):
        line = TextFormatter().format(_record(logging.WARNING, "retrying", caught))
    assert line.count("\n") == 0
    assert "frontline" in line and "[req req-7]" in line
    assert line.endswith("retrying (ConnectionError: refused)")
    # A bug (ERROR) keeps its traceback.
    assert "Traceback" in TextFormatter().format(_record(logging.ERROR, "bug", caught))


def test_no_request_means_no_request_id() -> None:
    entry = json.loads(JsonFormatter().format(_record(logging.INFO, "idle")))
    assert entry["request_id"] is None and entry["trace_id"] is None
    assert "[req" not in TextFormatter().format(_record(logging.INFO, "idle"))
