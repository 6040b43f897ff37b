"""A routed request completes through the real services whatever structured output the model
server supports (the frontline's one call with it: a `route` tool where tools work, a `ROUTE:`
line where they do not), and a role's fallback answers when its model server is down."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.fakes.openai_server import ROUTE_LINE, FakeOpenAI, Reply, one_call
from tests.support.harness import Client, System
from tests.support.systems import Systems

ROUTED = "please search for the opening hours of the Lisbon aquarium"


@pytest.fixture(scope="module")
def own_llm() -> Iterator[FakeOpenAI]:
    """A model server of this module's own: what its services learn stays here."""
    fake = FakeOpenAI().start()
    yield fake
    fake.stop()


@pytest.fixture(scope="module")
def modes_system(systems: Systems, own_llm: FakeOpenAI) -> Iterator[System]:
    # The worker's fallback is another model on the same server (scripted below).
    yield from systems.run(llm=own_llm, SIDEKICK_WORKER_LLM_FALLBACK_MODEL="fake-worker-backup")


def modes_used(fake: FakeOpenAI, model: str, since: int) -> set[str]:
    used = set()
    for body in fake.chat_calls(model)[since:]:
        fmt = body.get("response_format")
        used.add(fmt["type"] if fmt else "tools" if body.get("tools") else "prompt")
    return used


async def test_a_routed_request_completes_as_the_server_loses_each_structured_mode(
    modes_system: System, own_llm: FakeOpenAI
) -> None:
    phases: list[tuple[set[str], str | None, str]] = [
        (set(), "fence", "json_schema"),
        ({"json_schema"}, None, "tools"),
        ({"json_schema", "tools"}, "prose", "json_object"),
        ({"json_schema", "tools", "json_object"}, "fence", "prompt"),
    ]
    for refused, wrap, expected in phases:
        own_llm.reset()
        own_llm.refuse, own_llm.wrap = refused, wrap
        async with Client(modes_system.ws_url, events=True) as client:
            convo = await client.ask(ROUTED)
        assert convo.errors == [], (expected, convo.errors, modes_system.logs_tail())
        assert convo.end["status"] == "completed", expected
        assert convo.answer.startswith("Answer to:"), expected
        assert convo.progress("routed"), "the frontline routed it"
        for role in ("fake-orchestrator", "fake-evaluator"):
            calls = own_llm.chat_calls(role)
            # The first request after a refusal is refused once, then asked the new way.
            assert modes_used(own_llm, role, len(calls) - 1) == {expected}, (role, expected)
        # The frontline asks once, in the convention its server takes.
        last = own_llm.chat_calls("fake-frontline")[-1]
        tools = "tools" not in refused
        assert one_call(last) == ("tools" if tools else "marker"), expected
        system_prompt = last["messages"][0]["content"]
        assert (ROUTE_LINE in system_prompt) is not tools


async def test_the_fallback_model_answers_and_the_end_frame_says_so(
    modes_system: System, own_llm: FakeOpenAI
) -> None:
    own_llm.reset()
    own_llm.script("fake-worker", lambda body: Reply(status=503, error="overloaded"))
    own_llm.script("fake-worker-backup", lambda body: "The backup's answer.")
    async with Client(modes_system.ws_url, events=True) as client:
        convo = await client.ask(ROUTED)
    assert convo.errors == []
    assert convo.answer == "The backup's answer."
    models = convo.end["metadata"]["usage"]["models"]
    assert "fake-worker-backup" in models and "fake-worker" not in models
    assert own_llm.chat_calls("fake-worker"), "the primary was tried first"
