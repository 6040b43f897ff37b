"""One trace per request, through the retry loop, exported over OTLP from every service."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from collections.abc import Iterator

import pytest

from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.fakes.otlp import FakeOTLP, Span
from tests.support.harness import System
from tests.support.scripts import in_turn, verdict
from tests.support.systems import Systems


@pytest.fixture(scope="module")
def traced(systems: Systems, otlp: FakeOTLP) -> Iterator[System]:
    yield from systems.run(OTEL_EXPORTER_OTLP_ENDPOINT=otlp.url, OTEL_BSP_SCHEDULE_DELAY="100")


def descendants(spans: list[Span], root: Span) -> list[Span]:
    children: dict[str, list[Span]] = {}
    for s in spans:
        children.setdefault(s.parent_id, []).append(s)
    out, todo = [], [root]
    while todo:
        node = todo.pop()
        for child in children.get(node.span_id, []):
            out.append(child)
            todo.append(child)
    return out


async def test_a_retried_request_is_one_trace_with_an_attempt_span_per_try(
    traced: System, fake_llm: FakeOpenAI, otlp: FakeOTLP
) -> None:
    in_turn(
        fake_llm,
        "fake-evaluator",
        verdict(False, 35, "Add an example."),
        verdict(True, 88, "Good."),
    )
    convo = await traced.ask("search and explain tracing")
    trace_id = convo.end["metadata"]["trace_id"]
    assert trace_id and len(trace_id) == 32
    request_id = convo.end["request_id"]
    with urllib.request.urlopen(f"{traced.http_url}/api/workflows/{request_id}") as resp:
        assert json.load(resp)["state"]["trace_id"] == trace_id

    def complete() -> list[Span]:
        spans = otlp.trace(trace_id)
        attempts = [s for s in spans if s.name.startswith("attempt ")]
        evaluator_calls = [s for s in spans if s.name == "chat fake-evaluator"]
        return spans if len(attempts) == 2 and len(evaluator_calls) == 2 else []

    deadline = time.monotonic() + 30
    while not (spans := complete()):
        assert time.monotonic() < deadline, f"spans seen: {[s.name for s in otlp.trace(trace_id)]}"
        await asyncio.sleep(0.1)

    (root,) = [s for s in spans if s.name == "request received"]
    assert root.service == "sidekick-gateway" and root.parent_id == ""
    assert len(descendants(spans, root)) == len(spans) - 1, "every span hangs under the root"
    services = {s.service for s in spans}
    for name in ("gateway", "frontline", "orchestrator", "workers", "evaluator"):
        assert f"sidekick-{name}" in services, services
    assert {s.trace_id for s in spans} == {trace_id}

    attempts = sorted((s for s in spans if s.name.startswith("attempt ")), key=lambda s: s.start)
    assert [s.name for s in attempts] == ["attempt 1", "attempt 2"]
    assert attempts[0].parent_id == attempts[1].parent_id, "attempts are siblings"
    assert attempts[0].attributes["sidekick.attempt"] == 1
    assert attempts[0].attributes["sidekick.worker_type"] == "GENERAL"
    assert attempts[0].attributes["sidekick.verdict.passed"] is False
    assert attempts[0].attributes["sidekick.verdict.score"] == 35
    assert attempts[1].attributes["sidekick.verdict.passed"] is True

    for attempt in attempts:
        below = descendants(spans, attempt)
        worker_calls = [
            s
            for s in below
            if s.service == "sidekick-workers"
            and s.attributes.get("gen_ai.operation.name") == "chat"
        ]
        judge_calls = [
            s
            for s in below
            if s.service == "sidekick-evaluator"
            and s.attributes.get("gen_ai.operation.name") == "chat"
        ]
        assert len(worker_calls) == 1 and len(judge_calls) == 1, [s.name for s in below]
        for call in (*worker_calls, *judge_calls):
            assert call.attributes["gen_ai.request.model"] in ("fake-worker", "fake-evaluator")
            assert call.attributes["gen_ai.response.model"]
            assert call.attributes["gen_ai.usage.input_tokens"] == 11
            assert call.attributes["gen_ai.usage.output_tokens"] == 7
        # Prompt content is not recorded unless explicitly enabled.
        assert not any("gen_ai.prompt" in k for s in below for k in s.attributes)
