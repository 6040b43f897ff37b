"""Structured output on any OpenAI-compatible server: four ways to ask for a Pydantic model,
strongest first, and which one each (base URL, model) takes.

- `json_schema`: `response_format` with the strict JSON Schema (OpenAI, vLLM, recent Ollama);
- `tools`: one function with the schema as its parameters, which the model is told to call;
- `json_object`: `response_format: json_object` (JSON guaranteed, shape not) + the schema in
  the prompt;
- `prompt`: the schema in the prompt only.

Every reply is validated whatever the mode, so a weaker mode costs at most a repair turn. A
process starts each endpoint at the strongest mode (or the one `SIDEKICK_<ROLE>_LLM_STRUCTURED`
forces) and steps down the first time the server refuses it with an error that names the
feature; the choice is kept for the life of the process and logged once.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from services.runtime.base.settings import STRUCTURED_MODES, StructuredMode
from services.runtime.llm import schema as schemas
from services.runtime.llm.types import ChatReply, Messages

log = logging.getLogger("sidekick.llm")

# What a refusal of each mode says. A 400 for some other reason (context too long, a bad
# message) names none of these, so it is not mistaken for a missing feature.
_NAMES: dict[StructuredMode, re.Pattern[str]] = {
    "json_schema": re.compile(r"response_format|json_schema|structured|guided|grammar", re.I),
    "tools": re.compile(r"\btools?\b|tool_choice|function|jinja", re.I),
    "json_object": re.compile(r"response_format|json_object|json mode", re.I),
    "prompt": re.compile(r"(?!)"),  # nothing to refuse
}
# Statuses servers use for "I do not support that parameter" (OpenRouter says 404 "no
# endpoints found that support ...", llama.cpp has answered 500 for tools without --jinja).
REFUSAL_STATUSES = frozenset({400, 404, 422, 500, 501})


def refuses(mode: StructuredMode, status: int | None, message: str) -> bool:
    """Whether an error answering a request in `mode` says the server lacks that mode."""
    return status in REFUSAL_STATUSES and bool(_NAMES[mode].search(message))


def weaker(mode: StructuredMode) -> StructuredMode | None:
    i = STRUCTURED_MODES.index(mode)
    return STRUCTURED_MODES[i + 1] if i + 1 < len(STRUCTURED_MODES) else None


Key = tuple[str, str]  # (base URL, model)


class ModeBook:
    """The mode each (base URL, model) takes, learned once per process, and whether its server
    reports usage. What is learned here is told to `listeners` (the process shares it with the
    others through the bus: services/runtime/hosting/endpoints.py); what another process
    learned comes in by `learn`."""

    def __init__(self) -> None:
        self._modes: dict[Key, StructuredMode] = {}
        self._usage: dict[Key, bool] = {}
        self._lock = threading.Lock()
        self.listeners: list[Callable[[Key], None]] = []

    def _tell(self, key: Key) -> None:
        for listener in list(self.listeners):
            listener(key)

    def learn(self, key: Key, mode: StructuredMode | None, usage: bool | None) -> None:
        """What another process (or `sidekick doctor`) learned about `key`; a mode only ever
        moves down, never back to one this process saw refused."""
        with self._lock:
            current = self._modes.get(key, STRUCTURED_MODES[0])
            if mode is not None and STRUCTURED_MODES.index(mode) > STRUCTURED_MODES.index(current):
                self._modes[key] = mode
            if usage is not None:
                self._usage.setdefault(key, usage)

    def facts(self, key: Key) -> tuple[StructuredMode | None, bool | None]:
        """The learned mode (None: nothing refused yet) and whether usage is reported."""
        with self._lock:
            return self._modes.get(key), self._usage.get(key)

    def usage_seen(self, key: Key, reported: bool) -> None:
        """Whether a reply from `key` carried usage; told to the listeners the first time."""
        with self._lock:
            if self._usage.get(key) == reported:
                return
            self._usage[key] = reported
        self._tell(key)

    def mode(self, key: tuple[str, str], forced: StructuredMode | None) -> StructuredMode:
        if forced is not None:
            return forced
        with self._lock:
            return self._modes.get(key, STRUCTURED_MODES[0])

    def step_down(
        self, key: tuple[str, str], refused: StructuredMode, why: str
    ) -> StructuredMode | None:
        """Remember that `refused` does not work here; the next mode to try, if any."""
        nxt = weaker(refused)
        with self._lock:
            current = self._modes.get(key, STRUCTURED_MODES[0])
            if STRUCTURED_MODES.index(current) > STRUCTURED_MODES.index(refused):
                return current  # another call learned it meanwhile
            if nxt is not None:
                self._modes[key] = nxt
        self._tell(key)
        base_url, model = key
        log.warning(
            "structured output: %s at %s refused %s (%s); using %s from now on "
            "(set SIDEKICK_<ROLE>_LLM_STRUCTURED to choose)",
            model,
            base_url,
            refused,
            why[:200],
            nxt or "nothing",
        )
        return nxt

    def forget(self) -> None:
        with self._lock:
            self._modes.clear()
            self._usage.clear()


MODES = ModeBook()


def request(
    mode: StructuredMode, schema: type[BaseModel], messages: Messages
) -> tuple[Messages, dict[str, Any]]:
    """The messages and extra request fields that ask for `schema` in `mode`."""
    if mode == "json_schema":
        return messages, {"response_format": schemas.response_format(schema)}
    if mode == "tools":
        return messages, {"tools": [schemas.tool_for(schema)], "tool_choice": _choice(schema)}
    prompted = with_instruction(messages, schemas.instruction(schema))
    if mode == "json_object":
        return prompted, {"response_format": {"type": "json_object"}}
    return prompted, {}


def _choice(schema: type[BaseModel]) -> dict[str, Any]:
    return schemas.tool_choice(schema)


def with_instruction(messages: Messages, text: str) -> Messages:
    """`text` added to the first system message (some chat templates accept only one, first),
    or as a system message of its own before the conversation. The caller's list is kept."""
    out = list(messages)
    for i, message in enumerate(out):
        if message["role"] == "system" and isinstance(message.get("content"), str):
            out[i] = {"role": "system", "content": f"{message['content']}\n\n{text}"}
            return out
    return [{"role": "system", "content": text}, *out]


def reply_text(mode: StructuredMode, schema: type[BaseModel], reply: ChatReply) -> str:
    """The text that should hold the JSON: the function's arguments in `tools` mode (a server
    that ignored the forced call may still have written it as text), else the content."""
    if mode == "tools":
        for call in reply.tool_calls:
            if call.name == schema.__name__:
                return call.arguments
    return reply.content


def repair(
    mode: StructuredMode, schema: type[BaseModel], messages: Messages, bad: str, error: str
) -> Messages:
    """The conversation for the one retry of an invalid reply: what it said and what was wrong
    with it, and the schema again (a server that ignored the format never showed it)."""
    how = (
        f"Call {schema.__name__} again with arguments that fix this."
        if mode == "tools"
        else schemas.instruction(schema)
    )
    return [
        *messages,
        {"role": "assistant", "content": bad or "(empty)"},
        {"role": "user", "content": f"Your reply was not valid: {error}.\n{how}"},
    ]
