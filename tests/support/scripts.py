"""Scripts for the fake model that several test modules play: replies given in turn, an
evaluator that asks the user first, and an evaluator held back while a test acts."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.support.fakes.openai_server import FakeOpenAI, Reply, verdict


def in_turn(fake_llm: FakeOpenAI, model: str, *replies: Any) -> None:
    """`model` answers its calls with `replies`, one each, in order."""
    left = iter(replies)
    fake_llm.script(model, lambda body: next(left))


def evaluator_asks(fake_llm: FakeOpenAI, question: str = "Which city?") -> None:
    """The evaluator's first verdict asks the user `question` (the request waits for the
    answer); its second passes."""
    in_turn(
        fake_llm,
        "fake-evaluator",
        verdict(False, 20, question, user_input_needed=True, questions=[question]),
        verdict(True, 90, "Good."),
    )


@contextmanager
def evaluator_held(
    fake_llm: FakeOpenAI, judged: dict[str, Any] | None = None
) -> Iterator[threading.Event]:
    """Every verdict (`judged`, a pass by default) waits until the event is set, so requests
    stay in flight while the test acts; leaving the block sets it."""
    hold = threading.Event()
    reply = json.dumps(judged or verdict(True, 90, "ok"))
    fake_llm.script("fake-evaluator", lambda body: Reply(reply, wait=hold))
    try:
        yield hold
    finally:
        hold.set()
