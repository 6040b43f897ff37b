"""The one way services talk to a model: the OpenAI API (the `openai` SDK's client, headers and
errors) against any compatible endpoint.
Imports `base` only.

- client.py: `LLMClient`, a role's model: chat, streaming, embeddings and structured output,
  with an optional fallback endpoint used when the primary fails after its retries.
- endpoint.py: one endpoint's raw calls, measured and traced.
- transport.py: the HTTP under a call: a POST on the process's one aiohttp session, with the
  SDK's headers and error types.
- calls.py: how one call is bounded (`SIDEKICK_LLM_TIMEOUT`), retried and accounted.
- sse.py: a streamed chat completion's server-sent events, read with little work per event.
- choice.py: answer, or call one function instead, in one streamed call (the frontline's
  answer-or-route).
- modes.py: structured output in the strongest mode each (base URL, model) supports
  (json_schema, tools, json_object, prompt), learned once per process.
- schema.py: a Pydantic model as each mode asks for it; a reply (bare, fenced or in prose) read
  back and validated.
- prompts.py: a session's turns as the messages a model reads.
- types.py: what a model call gives back, and the budget guard's type.
- override.py: a model one request asked for (a replay's), used by its chat calls.
- probe.py: what one endpoint supports, found with tiny requests (for `sidekick doctor`).
"""

from __future__ import annotations

from services.runtime.llm.client import LLMClient
from services.runtime.llm.schema import response_format, strict_schema
from services.runtime.llm.types import (
    BudgetGuard,
    ChatReply,
    Completion,
    Messages,
    StreamResult,
    Structured,
    ToolCall,
)

__all__ = [
    "BudgetGuard",
    "ChatReply",
    "Completion",
    "LLMClient",
    "Messages",
    "StreamResult",
    "Structured",
    "ToolCall",
    "response_format",
    "strict_schema",
]
