"""How `sidekick chat` shows a conversation: `RichView` for a terminal (Markdown, a spinner
with the request's current step, coloured verdicts) and `PlainView` for pipes and logs (text
as it streams, one line per step). Both take the same calls from the client in `chat.py`."""

from __future__ import annotations

import re
import sys
from typing import Any, Protocol, TextIO

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.live import Live
from rich.markdown import Markdown
from rich.spinner import Spinner
from rich.text import Text

Frame = dict[str, Any]

STATUS_WORDS = {
    "completed": "completed",
    "partial": "partial answer: attempts ran out",
    "failed": "failed",
    "cancelled": "cancelled",
    "awaiting_clarification": "waiting for your answer",
    "rejected": "not sent",
}
SOURCES_HEADER = re.compile(r"(?:^|\n)Sources:\n")
SOURCE_LINE = re.compile(r"^\[(\d+)\] \[.*\]\((\S+)\)")


class View(Protocol):
    def info(self, text: str) -> None: ...
    def prompt(self) -> str | None: ...
    def begin(self, replayed: bool = False) -> None: ...
    def chunk(self, text: str) -> None: ...
    def progress(self, frame: Frame) -> None: ...
    def clarification(self, questions: list[Frame]) -> None: ...
    def error(self, code: str, message: str) -> None: ...
    def end(self, frame: Frame) -> None: ...
    def close(self) -> None: ...


def step_text(f: Frame) -> str:
    """One progress frame in words."""
    stage = str(f.get("stage", ""))
    detail = f.get("detail") or ""
    worker = f.get("worker_type") or "a worker"
    n = f.get("attempt")
    if stage == "direct":
        return "answering directly" + (f": {detail}" if detail else "")
    if stage == "routed":
        return "routed to the orchestrator" + (f": {detail}" if detail else "")
    if stage == "decided":
        return f"decided on {worker}" + (f" ({detail})" if detail else "")
    if stage == "attempt_started":
        return f"attempt {n} with {worker}"
    if stage == "evaluated":
        verdict = "passed" if f.get("passed") else "not passed"
        text = f"attempt {n} {verdict}, score {f.get('score')}/100"
        if f.get("feedback"):
            text += f": {f['feedback']}"
        if f.get("suggestions"):
            text += " (suggestions: " + "; ".join(f["suggestions"]) + ")"
        return text
    return stage.replace("_", " ") + (f": {detail}" if detail else "")


def summary(frame: Frame) -> str:
    """The end frame in one line: status, attempts, score, tokens, cache."""
    status = str(frame.get("status") or "completed")
    meta = frame.get("metadata") or {}
    parts = [STATUS_WORDS.get(status, status)]
    attempts = meta.get("attempts")
    if attempts:
        parts.append(f"{attempts} attempt{'s' if attempts != 1 else ''}")
    if meta.get("score") is not None:
        parts.append(f"score {meta['score']}/100")
    usage = meta.get("usage") or {}
    if usage.get("input_tokens") or usage.get("output_tokens"):
        tokens_in, tokens_out = usage.get("input_tokens", 0), usage.get("output_tokens", 0)
        parts.append(f"{tokens_in} tokens in, {tokens_out} out")
    if meta.get("route") == "cached":
        parts.append("from the cache")
    return " · ".join(parts)


def split_sources(text: str, sources: list[Frame]) -> tuple[str, list[tuple[int, Frame]]]:
    """The answer without the source list workers append for plain clients, and the end
    frame's sources numbered as the answer cites them (as the web page does)."""
    in_order = (text, list(enumerate(sources, 1)))
    starts = [m.start() for m in SOURCES_HEADER.finditer(text)]
    if not starts:
        return in_order
    start = starts[-1]
    lines = text[start:].lstrip("\n").split("\n")[1:]
    numbers: dict[str, int] = {}
    taken = 0
    for line in lines:
        m = SOURCE_LINE.match(line)
        if not m:
            break
        numbers[m.group(2)] = int(m.group(1))
        taken += 1
    if not taken or not all(s.get("url") in numbers for s in sources):
        return in_order
    rest = "\n".join(lines[taken:]).strip()
    body = text[:start].rstrip() + (f"\n\n{rest}" if rest else "")
    return body, [(numbers[str(s["url"])], s) for s in sources]


class PlainView:
    """Text as it arrives, for pipes: nothing but the answer, the steps and the outcome."""

    def __init__(self, out: TextIO | None = None, quiet: bool = False) -> None:
        self.out = out or sys.stdout
        self.quiet = quiet
        self.mid_line = False
        self.answering = False

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    def _line(self, text: str) -> None:
        self._write(("\n" if self.mid_line else "") + text + "\n")
        self.mid_line = False

    def info(self, text: str) -> None:
        self._line(text)

    def prompt(self) -> str | None:
        self._write("\nyou> ")
        line = sys.stdin.readline()
        return line if line else None

    def begin(self, replayed: bool = False) -> None:
        if replayed:
            self._line("(an answer that arrived while you were away)")
        self.answering = False

    def chunk(self, text: str) -> None:
        if not self.answering:  # after the steps that came first
            self._write(("\n" if self.mid_line else "") + "sidekick> ")
            self.answering = True
        self._write(text)
        self.mid_line = not text.endswith("\n")

    def progress(self, frame: Frame) -> None:
        if not self.quiet:
            self._line(f"  · {step_text(frame)}")

    def clarification(self, questions: list[Frame]) -> None:
        for q in questions:
            self._line(f"  ? {q.get('question')}")
        self._line("  (your next message answers)")

    def error(self, code: str, message: str) -> None:
        # The message is written for people; the code is for programs (and --json clients).
        self._line(f"error: {message or code}")

    def end(self, frame: Frame) -> None:
        if not self.quiet and frame.get("status"):
            self._line(f"  ({summary(frame)})")
        elif self.mid_line:
            self._line("")

    def close(self) -> None:
        if self.mid_line:
            self._line("")


class _Streaming:
    """The live part of a turn: the tail of the answer so far, then the spinner. Parsed when
    rich refreshes (a few times a second), not per token."""

    def __init__(self, view: RichView) -> None:
        self.view = view

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        room = max(options.height or console.height, 8) - 3
        tail = "\n".join(self.view.text.splitlines()[-room:])
        parts: list[Any] = [Markdown(tail)] if tail.strip() else []
        parts.append(self.view.spinner)
        yield Group(*parts)


class RichView:
    """For a terminal: the answer as Markdown, steps as coloured lines, a spinner meanwhile."""

    def __init__(self, console: Console | None = None, quiet: bool = False) -> None:
        self.console = console or Console()
        self.quiet = quiet
        self.text = ""
        self.spinner = Spinner("dots", text=Text("thinking…", style="dim"))
        self.live: Live | None = None

    def info(self, text: str) -> None:
        self.console.print(text, style="dim", markup=False, highlight=False)

    def prompt(self) -> str | None:
        try:
            return self.console.input("\n[bold cyan]you>[/] ") + "\n"
        except EOFError:
            return None

    def _status(self, text: str) -> None:
        self.spinner.update(text=Text(text, style="dim"))

    def begin(self, replayed: bool = False) -> None:
        self._stop()
        self.text = ""
        if replayed:
            self.info("(an answer that arrived while you were away)")
        self._status("thinking…")
        self.live = Live(
            _Streaming(self),
            console=self.console,
            refresh_per_second=10,
            transient=True,
        )
        self.live.start()

    def chunk(self, text: str) -> None:
        self.text += text
        self._status("writing…")

    def progress(self, frame: Frame) -> None:
        words = step_text(frame)
        self._status(words + "…")
        if self.quiet:
            return
        if frame.get("stage") == "evaluated":
            mark, style = ("✓", "green") if frame.get("passed") else ("✗", "yellow")
            self.console.print(Text(f"  {mark} {words}", style=style))
        else:
            self.console.print(Text(f"  · {words}", style="dim"))

    def clarification(self, questions: list[Frame]) -> None:
        self._stop()
        self.console.print(Text("Sidekick needs more information:", style="bold"))
        for n, q in enumerate(questions, 1):
            self.console.print(Text(f"  {n}. {q.get('question')}"))
        self.console.print(Text("  (your next message answers)", style="dim"))

    def error(self, code: str, message: str) -> None:
        self._stop()
        self.console.print(Text(f"error: {message or code}", style="bold red"))

    def end(self, frame: Frame) -> None:
        self._stop()
        meta = frame.get("metadata") or {}
        body, sources = split_sources(self.text, list(meta.get("sources") or []))
        if body.strip():
            self.console.print(Markdown(body))
        if sources:
            self.console.print(Text("Sources", style="bold"))
            for n, s in sources:
                line = Text(f"  [{n}] ")
                line.append(str(s.get("title") or s.get("url")))
                line.append(f"  {s.get('url')}", style="dim")
                self.console.print(line)
        if frame.get("status") == "partial" and meta.get("feedback"):
            self.console.print(
                Text(f"Note: the evaluator still found this lacking: {meta['feedback']}"),
                style="yellow",
            )
        if frame.get("status"):
            style = {"completed": "green", "partial": "yellow"}.get(str(frame["status"]), "red")
            if frame["status"] == "awaiting_clarification":
                style = "cyan"
            self.console.print(Text(summary(frame), style=f"dim {style}"))
        self.text = ""

    def _stop(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None

    def close(self) -> None:
        self._stop()


def make_view(plain: bool | None, quiet: bool) -> View:
    """Rich on a terminal, plain on a pipe, unless asked (`--plain`)."""
    if plain is None:
        plain = not sys.stdout.isatty()
    return PlainView(quiet=quiet) if plain else RichView(quiet=quiet)
