"""What a model call gives back."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from openai.types.chat import (
    ChatCompletionAssistantMessageParam,
    ChatCompletionMessageParam,
    ChatCompletionMessageToolCallParam,
)
from pydantic import BaseModel

from contracts import Usage

T = TypeVar("T", bound=BaseModel)
Messages = list[ChatCompletionMessageParam]
# Consulted before each HTTP model call (a first call, a structured reply's repair, a fallback's):
# given what the calls already made in this client call used and the next call's maximum in
# tokens (its prompt, estimated, and its max_tokens), the limit it would pass, in words, or None
# while it fits. A refusal raises BudgetSpent and the call is not sent.
BudgetGuard = Callable[[Usage, int], str | None]


@dataclass
class Structured(Generic[T]):
    value: T
    usage: Usage
    model: str
    mode: str = "json_schema"  # how it was asked for (services/runtime/llm/modes.py)


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

    content: str
    tool_calls: list[ToolCall]
    finish_reason: str | None
    usage: Usage
    model: str

    def as_param(self) -> ChatCompletionAssistantMessageParam:
        """The turn as a message to send back with the tool results that answer it."""
        return assistant_turn(self.content, [(c.id, c.name, c.arguments) for c in self.tool_calls])


def assistant_turn(
    content: str | None, calls: Iterable[tuple[str, str, str]]
) -> ChatCompletionAssistantMessageParam:
    """An assistant turn as a message: its text (None when empty) and the function calls it
    asked for, each (id, name, arguments)."""
    param: ChatCompletionAssistantMessageParam = {"role": "assistant", "content": content or None}
    tool_calls: list[ChatCompletionMessageToolCallParam] = [
        {"id": id_, "type": "function", "function": {"name": name, "arguments": arguments}}
        for id_, name, arguments in calls
    ]
    if tool_calls:
        param["tool_calls"] = tool_calls
    return param


@dataclass
class StreamResult:
    """Filled in as a stream is consumed; complete once iteration ends."""

    text: str = ""
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
