"""How one model call is bounded, retried and accounted, whatever the server.

- Bounded: `SIDEKICK_LLM_TIMEOUT` covers a whole attempt, from connecting to the last token;
  when it runs out the HTTP request is closed (a server that streams stops generating: see
  `SIDEKICK_LLM_STREAM_CALLS`).
- Retried: 429, 5xx, connection errors and timeouts, with exponential back-off honouring
  `Retry-After`, except a 4xx or 5xx whose body names a request feature (`response_format`,
  `json_schema`, `tools`, `tool_choice`): that is the server saying what it lacks, and asking
  again would only get the same answer (llama.cpp answers a json_schema it cannot take with 500).
- Accounted: a server that reports no usage gets its tokens counted here, by a stated estimate
  (`estimate_tokens`), and the figure is marked as counted (`Usage.counted_calls`); so does a
  streamed call cut short (endpoint.py), from what was sent and what came back.
- Counted in advance: a call's maximum (`call_maximum`: its prompt, estimated the same way, and
  its `max_tokens` in full) is what a budget guard weighs before the call is sent.
- Tallied: every call's usage, however it ended (a call cancelled or timed out before its answer
  at its prompt, estimated), is added to the `Tally` its task runs under, if any (`tallying`):
  what a worker stopped with its cancelled request spent is known that way.
"""

from __future__ import annotations

import email.utils
import json
import math
import random
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import openai

from contracts import Usage
from services.runtime.base.errors import SidekickError

# A request feature named in an error body: the server says it lacks it.
CAPABILITY = re.compile(r"response_format|json_schema|\btools?\b|tool_choice", re.I)
RETRY_STATUSES = frozenset({408, 409, 429})
CHARS_PER_TOKEN = 4  # the estimate: four ASCII characters a token, one a token for the rest
TOKENS_PER_MESSAGE = 4  # a chat template's few tokens around each message
NO_MAX_TOKENS = 4096  # a reply's maximum counted in advance where no max_tokens is sent
SENT_ALONG = ("tools", "response_format")  # request parts the model reads besides the messages


class CallTimeout(SidekickError):
    """The whole attempt ran past the timeout; its HTTP request was closed."""


def status_of(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def capability_answer(exc: BaseException) -> bool:
    """Whether `exc` is an HTTP error whose body names a request feature the server lacks."""
    status = status_of(exc)
    return status is not None and 400 <= status < 600 and bool(CAPABILITY.search(str(exc)))


def retryable(exc: BaseException) -> bool:
    if capability_answer(exc):
        return False
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in RETRY_STATUSES or exc.status_code >= 500
    return isinstance(exc, openai.APIConnectionError | CallTimeout)


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return float(value) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value)
        return max(0.0, float(parsed.timestamp()) - time.time()) if parsed else None


def backoff(attempt: int, exc: BaseException, cap: float) -> float:
    """Seconds to wait before retry `attempt` (0 first): the server's Retry-After when it
    gave a sensible one, else 0.5 s doubling, with jitter; never over `cap`."""
    asked = _retry_after(exc)
    if asked is not None and 0 <= asked <= 60:
        return min(asked, cap)
    return min(0.5 * float(2**attempt) * (1 - 0.25 * random.random()), cap)


def estimate_tokens(text: str) -> int:
    """The stated estimate: one token per four ASCII characters (rounded up) and one per any
    other character. English runs at about four characters a token; text in other scripts
    (Chinese, Japanese, Korean, Cyrillic, ...) at about one token a character or fewer in the
    GPT-4o and GPT-4 tokenizers, so counting it as English, four characters a token, would
    undercount it up to fourfold (docs/budgets.md: "How prompts are estimated")."""
    if text.isascii():
        return math.ceil(len(text) / CHARS_PER_TOKEN)
    ascii_chars = len(text.encode("ascii", "ignore"))
    return math.ceil(ascii_chars / CHARS_PER_TOKEN) + len(text) - ascii_chars


def prompt_text(messages: Any) -> list[str]:
    out = []
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out += [str(p.get("text", "")) for p in content if isinstance(p, dict)]
        for call in (message.get("tool_calls") or []) if isinstance(message, dict) else []:
            out.append(str((call.get("function") or {}).get("arguments") or ""))
    return out


def counted(model: str, messages: Any, reply: str, extra: dict[str, Any]) -> Usage:
    """The usage of a call the server reported none for, counted here (marked as counted)."""
    parts = prompt_text(messages)
    for key in ("tools", "response_format"):
        if key in extra:
            parts.append(str(extra[key]))
    prompt = sum(estimate_tokens(p) for p in parts) + TOKENS_PER_MESSAGE * len(messages)
    usage = Usage.of_call(model, prompt, estimate_tokens(reply))
    return usage.model_copy(update={"counted_calls": 1})


def prompt_estimate(messages: Any, extra: dict[str, Any] | None = None) -> int:
    """A call's prompt in tokens, estimated as a server's missing usage is counted
    (`estimate_tokens`), with the tool definitions and response format it sends."""
    sent = extra or {}
    parts = prompt_text(messages) + [
        json.dumps(sent[k], default=str) for k in SENT_ALONG if sent.get(k)
    ]
    return sum(estimate_tokens(p) for p in parts) + TOKENS_PER_MESSAGE * len(messages)


def reply_limit(max_tokens: int) -> int:
    """A call's reply in tokens at most: its `max_tokens`, or, where none is sent, the default
    answer limit (an estimate: the server's own limit is not known here)."""
    return max_tokens if max_tokens > 0 else NO_MAX_TOKENS


def call_maximum(messages: Any, extra: dict[str, Any]) -> int:
    """The most tokens (in + out) one call of `messages` with `extra` can take."""
    limit = extra.get("max_tokens")
    return prompt_estimate(messages, extra) + reply_limit(limit if isinstance(limit, int) else 0)


def usage_of(raw: dict[str, Any] | None, model: str) -> Usage:
    """A server's reported usage, as one call of `model`."""
    if not raw:
        return Usage.of_call(model)
    return Usage.of_call(
        model, int(raw.get("prompt_tokens") or 0), int(raw.get("completion_tokens") or 0)
    )


def reported(usage: Any) -> bool:
    """Whether a server's `usage` says anything (llama.cpp's streams carry none, or zeros)."""
    return isinstance(usage, dict) and bool(
        usage.get("prompt_tokens") or usage.get("completion_tokens")
    )


@dataclass
class Tally:
    """What the model calls made under it spent, however each ended."""

    usage: Usage = field(default_factory=Usage)


_TALLY: ContextVar[Tally | None] = ContextVar("sidekick_llm_tally", default=None)


@contextmanager
def tallying() -> Iterator[Tally]:
    """Tally the model calls made in this context (and the tasks it starts from here on)."""
    found = Tally()
    token = _TALLY.set(found)
    try:
        yield found
    finally:
        _TALLY.reset(token)


def tally(usage: Usage) -> None:
    """Add one call's usage to the tally of the context it was made in, if it has one."""
    found = _TALLY.get()
    if found is not None:
        found.usage = found.usage + usage
