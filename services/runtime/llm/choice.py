"""Answer, or call one function instead, in one streamed model call; the choice is read from
the first tokens, so an answer streams at once and a call costs no second model call.

Two conventions, by what the endpoint takes (modes.py):

- `tools` (the endpoint takes `json_schema` or `tools`): the function is offered as a tool with
  `tool_choice: auto`. Text deltas are the answer; a call of the function is the choice.
- `marker` (it takes neither: `json_object` or `prompt`): the system prompt asks the model to
  reply with one line `<MARKER> <argument>` and nothing else to make the call. The first
  characters decide: the text is held only while it could still be the marker (a few
  characters), and the stream is closed after the marker's line.

A model that writes some text and then calls the function (a preamble) has still made the call;
the text it streamed stays where it went. A reply with neither text nor call is invalid.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from contracts import Usage
from services.runtime.base.settings import StructuredMode
from services.runtime.llm import schema as schemas
from services.runtime.llm.types import Messages, StreamResult

Convention = Literal["tools", "marker"]
# Characters a model may put before a marker (markdown emphasis, code, quotes, a heading).
_DECORATION = " \t\r\n*`_>#\"'"


@dataclass(frozen=True)
class Choice:
    """A function with one string argument that the model may call instead of answering."""

    name: str  # e.g. "route"
    argument: str  # e.g. "reason"
    schema: type[BaseModel]  # its parameters (one string field named `argument`)
    marker: str  # the text convention's line start, e.g. "ROUTE:"

    def how(self, convention: Convention) -> str:
        """How the model makes the call, in words, for the system prompt."""
        if convention == "tools":
            return f"call the `{self.name}` function with a one-sentence {self.argument}"
        return (
            f"reply with exactly one line `{self.marker} <one-sentence {self.argument}>` "
            "and nothing else"
        )


@dataclass
class ChoiceResult:
    """Filled in as the call's stream is consumed: the answer's text, or the call's argument."""

    called: str | None = None  # the argument, when the model chose the function
    text: str = ""
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    convention: Convention = "tools"


def convention(mode: StructuredMode) -> Convention:
    return "tools" if mode in ("json_schema", "tools") else "marker"


@functools.cache
def tool(choice: Choice) -> dict[str, Any]:
    doc = (choice.schema.__doc__ or choice.name).strip().splitlines()[0]
    return {
        "type": "function",
        "function": {
            "name": choice.name,
            "description": doc,
            "parameters": schemas.strict_schema(choice.schema),
        },
    }


def request(choice: Choice, how: Convention, messages: Messages) -> tuple[Messages, dict[str, Any]]:
    """The messages and extra request fields of the call in convention `how`."""
    if how == "tools":
        return messages, {"tools": [tool(choice)], "tool_choice": "auto"}
    return messages, {}


def nudge(choice: Choice, how: Convention, messages: Messages) -> Messages:
    """The conversation for the one retry of an empty reply."""
    return [
        *messages,
        {
            "role": "user",
            "content": "Your reply was empty. Answer my last message, or " + choice.how(how) + ".",
        },
    ]


def argument_of(choice: Choice, result: StreamResult) -> str | None:
    """The argument of the function call in `result`, if the model made it. Arguments that
    are not the JSON asked for still count as the call: the model chose it; the text is kept."""
    for call in result.tool_calls:
        if call.name != choice.name:
            continue
        try:
            value = json.loads(call.arguments or "{}")
        except ValueError:
            return call.arguments.strip() or f"the model called {choice.name}"
        if isinstance(value, dict) and isinstance(value.get(choice.argument), str):
            return str(value[choice.argument]).strip()
        return call.arguments.strip() or f"the model called {choice.name}"
    return None


class Marker:
    """The text convention, fed delta by delta: `feed` returns the text to pass on now (empty
    while undecided or once the marker was seen); `called` is the argument after the marker."""

    def __init__(self, choice: Choice) -> None:
        self.marker = choice.marker.upper()
        self.held = ""
        self.decided: Literal["answer", "call"] | None = None

    def feed(self, delta: str) -> str:
        if self.decided == "answer":
            return delta
        self.held += delta
        if self.decided == "call":
            return ""
        head = self.held.lstrip(_DECORATION).upper()
        if head.startswith(self.marker):
            self.decided = "call"
            return ""
        if len(head) >= len(self.marker) or not self.marker.startswith(head):
            self.decided = "answer"
            out, self.held = self.held, ""
            return out
        return ""

    @property
    def line_done(self) -> bool:
        """The marker's line is complete: the rest of the reply is not needed."""
        return self.decided == "call" and "\n" in self.held.lstrip(_DECORATION)

    def end(self) -> str:
        """At the end of the stream: text still held (a short answer that looked like the
        start of the marker), which is the answer's."""
        if self.decided is None:
            self.decided = "answer"
            out, self.held = self.held, ""
            return out
        return ""

    @property
    def called(self) -> str | None:
        if self.decided != "call":
            return None
        head = self.held.lstrip(_DECORATION)
        line = head[len(self.marker) :].split("\n", 1)[0]
        return line.strip(_DECORATION) or "no reason given"
