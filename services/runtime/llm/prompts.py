"""Helpers for building model conversations. Fetched or user text is always passed as data
in user-role messages, never spliced into a system prompt."""

from __future__ import annotations

from openai.types.chat import ChatCompletionMessageParam

from contracts import Turn


def history_messages(history: list[Turn]) -> list[ChatCompletionMessageParam]:
    out: list[ChatCompletionMessageParam] = []
    for turn in history:
        if turn.role == "user":
            out.append({"role": "user", "content": turn.content})
        else:
            out.append({"role": "assistant", "content": turn.content})
    return out


def conversation(system: str, history: list[Turn], user: str) -> list[ChatCompletionMessageParam]:
    return [
        {"role": "system", "content": system},
        *history_messages(history),
        {"role": "user", "content": user},
    ]


def transcript(history: list[Turn]) -> str:
    """History as plain text, for a judge that must read it as data."""
    if not history:
        return "(no earlier turns)"
    return "\n".join(f"{t.role.upper()}: {t.content}" for t in history)
