"""`sidekick chat` against the live services: plain text through a pipe, Markdown with a spinner
on a terminal (a real pseudo-terminal), and the rich renderer's output for known frames."""

from __future__ import annotations

import io
import os
import re
import select
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console

from services.cli.chatview import RichView, split_sources
from tests.support.fakes.openai_server import FakeOpenAI
from tests.support.harness import ROOT, System
from tests.support.protocols import chat_env, run_chat
from tests.support.scripts import decide, evaluator_asks, evaluator_held, in_turn, verdict

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def test_through_a_pipe_it_prints_plain_answers_steps_and_outcomes(
    system: System, fake_llm: FakeOpenAI
) -> None:
    in_turn(
        fake_llm, "fake-evaluator", verdict(False, 40, "Name the moon."), verdict(True, 92, "Good.")
    )
    done = run_chat(system, "hello there\nsearch why tides happen\n")
    out = done.stdout
    assert done.returncode == 0, done.stderr
    assert "\x1b[" not in out  # not a terminal: no colours, no spinner
    assert "sidekick> Hello there! How can I help you today?" in out
    assert "  · routed to the orchestrator: tools" in out
    assert "  · attempt 1 with GENERAL" in out
    assert "  · attempt 1 not passed, score 40/100: Name the moon." in out
    assert "  · attempt 2 passed, score 92/100: Good." in out
    assert "  · attempt 2 passed, score 92/100: Good.\nsidekick> Answer to: " in out
    assert re.search(r"\(completed · 2 attempts · score 92/100 · \d+ tokens in, \d+ out\)", out)
    assert out.index("Hello there!") < out.index("Answer to: ")


def test_clarifications_refusals_and_errors_reach_a_plain_client(
    system: System, fake_llm: FakeOpenAI
) -> None:
    evaluator_asks(fake_llm)
    decisions = iter(
        [
            decide("GENERAL", "the weather for the trip"),
            decide("NONE", "Sidekick does not pick locks."),
        ]
    )
    fake_llm.script("fake-orchestrator", lambda body: next(decisions)(body))
    session = uuid.uuid4().hex[:12]
    long_line = "x" * 30_000  # over SIDEKICK_MAX_MESSAGE_CHARS (20000)
    lines = f"search the weather for my trip\nLisbon\nroute: pick this lock\n{long_line}\n"
    done = run_chat(system, lines, "--plain", "--session", session)
    out = done.stdout
    assert done.returncode == 0, done.stderr
    assert "  ? Which city?" in out
    assert "(waiting for your answer" in out
    assert "sidekick> Answer to: " in out
    assert "Lisbon" in str(fake_llm.chat_calls("fake-worker")[-1]["messages"])
    assert "error: Sidekick will not do this: Sidekick does not pick locks." in out
    assert "(failed)" in out
    assert "error: Messages are limited to 20000 characters." in out
    assert f"as session {session}" in out


def test_a_refused_token_gets_one_clear_line(secure_system: System) -> None:
    done = run_chat(secure_system, "hello\n", "--token", "wrong-token-123")
    assert done.returncode == 1
    assert "refused the connection: HTTP 401 (check --token or $SIDEKICK_TOKEN)" in done.stdout


class Terminal:
    """`sidekick chat` on a pseudo-terminal, as a person runs it; what it wrote so far."""

    def __init__(self, proc: subprocess.Popen[bytes], fd: int) -> None:
        self.proc = proc
        self.fd = fd
        self.seen = bytearray()

    def type(self, keys: bytes) -> None:
        os.write(self.fd, keys)

    def read_until(self, wanted: str, timeout: float = 90) -> str:
        """Everything written so far, once `wanted` is among it."""
        deadline = time.monotonic() + timeout
        while wanted not in ANSI.sub("", self.seen.decode(errors="replace")):
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(
                    f"never saw {wanted!r} in:\n{self.seen.decode(errors='replace')}"
                )
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                try:
                    self.seen += os.read(self.fd, 65536)
                except OSError:  # the terminal closed: the program ended
                    break
        return self.seen.decode(errors="replace")


@contextmanager
def chat_on_a_terminal(system: System, **env: str) -> Iterator[Terminal]:
    """`sidekick chat` on a fresh pseudo-terminal (`env`: its size); killed if still running
    when the block ends."""
    main, child = os.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "services.cli", "chat", "--url", system.ws_url],
        stdin=child,
        stdout=child,
        stderr=child,
        cwd=ROOT,
        env={**chat_env(), "TERM": "xterm-256color", **env},
        close_fds=True,
    )
    os.close(child)
    try:
        yield Terminal(proc, main)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(main)


def test_on_a_terminal_it_renders_markdown_with_a_spinner(
    system: System, fake_llm: FakeOpenAI
) -> None:
    answer = "Tides have **two** causes:\n\n1. the moon\n2. the sun\n\n```\ntide = moon + sun\n```"

    def frontline(body: dict[str, Any]) -> Any:
        if body.get("response_format"):
            return {"route_to_orchestrator": False, "reason": "small talk"}
        return answer

    fake_llm.script("fake-frontline", frontline)
    with chat_on_a_terminal(system, COLUMNS="80", LINES="30") as term:
        term.read_until("you>")
        term.type(b"hi, why tides?\r")
        screen = term.read_until("completed")
        term.type(b"\x04")  # Ctrl-D at the prompt quits
        assert term.proc.wait(30) == 0
    text = ANSI.sub("", screen)
    assert "\x1b[1m" in screen  # bold: the Markdown was rendered, not printed
    assert "**two**" not in text
    assert "two causes" in text
    assert " 1 the moon" in text  # rich numbers a list its own way
    assert "tide = moon + sun" in text
    assert re.search(r"[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] (answering directly|writing)", text)  # the spinner
    assert "answering directly" in text


def test_ctrl_c_cancels_the_running_request_and_ctrl_d_quits(
    system: System, fake_llm: FakeOpenAI
) -> None:
    with evaluator_held(fake_llm), chat_on_a_terminal(system, COLUMNS="100") as term:
        term.read_until("you>")
        term.type(b"search something slow\r")
        term.read_until("attempt 1 with GENERAL")
        term.proc.send_signal(signal.SIGINT)
        screen = term.read_until("cancelled")
        term.read_until("you>")
        term.type(b"\x04")
        assert term.proc.wait(30) == 0
    assert "cancelling…" in ANSI.sub("", screen)


def test_the_rich_view_renders_steps_markdown_sources_and_the_outcome() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100, color_system="standard")
    view = RichView(console)
    view.begin()
    view.progress({"stage": "routed", "detail": "needs a search"})
    view.progress({"stage": "attempt_started", "attempt": 1, "worker_type": "SEARCH"})
    view.progress(
        {"stage": "evaluated", "attempt": 1, "passed": False, "score": 40, "feedback": "Vague."}
    )
    view.progress({"stage": "evaluated", "attempt": 2, "passed": True, "score": 92})
    for chunk in ["The **moon** pulls [1]", "; the wind pushes [2].\n\n", "Sources:\n"]:
        view.chunk(chunk)
    view.chunk("[1] [Moon and tides](https://tides.example/moon)\n")
    view.chunk("[2] [Wind](https://waves.example/wind) (2 days ago)")
    sources = [
        {"title": "Moon and tides", "url": "https://tides.example/moon"},
        {"title": "Wind", "url": "https://waves.example/wind"},
    ]
    view.end(
        {
            "on_chat_model_end": True,
            "status": "completed",
            "metadata": {
                "attempts": 2,
                "score": 92,
                "sources": sources,
                "usage": {"input_tokens": 30, "output_tokens": 12, "calls": 4},
            },
        }
    )
    raw = out.getvalue()
    text = ANSI.sub("", raw)
    # While it waits, a spinner shows the current step (redrawn under each printed step).
    assert re.search(r"[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] routed to the orchestrator: needs a search…", text)
    assert "· routed to the orchestrator: needs a search" in text
    assert "✗ attempt 1 not passed, score 40/100: Vague." in text
    assert "✓ attempt 2 passed, score 92/100" in text
    assert "\x1b[1mmoon\x1b[0m" in raw  # **moon** in bold
    final = text[text.rindex("writing…") :]  # what stays once the live part is cleared
    assert "The moon pulls [1]; the wind pushes [2]." in final
    assert "Sources:" not in final  # the appended text list gave way to the structured one
    assert "[1] Moon and tides  https://tides.example/moon" in text
    assert "[2] Wind  https://waves.example/wind" in text
    assert "completed · 2 attempts · score 92/100 · 30 tokens in, 12 out" in text


def test_sources_keep_the_numbers_the_answer_cites() -> None:
    text = "B [2], E [5].\n\nSources:\n[2] [B](https://b.example/)\n[5] [E](https://e.example/)"
    body, numbered = split_sources(
        text, [{"url": "https://b.example/"}, {"url": "https://e.example/"}]
    )
    assert body == "B [2], E [5]."
    assert [n for n, _ in numbered] == [2, 5]
    body, numbered = split_sources(text, [{"url": "https://z.example/"}])
    assert body == text
    assert [n for n, _ in numbered] == [1]
