"""A fake OpenAI-compatible API: `/v1/chat/completions` (JSON and SSE streaming, json_schema
response formats), `/v1/embeddings`, `/v1/models`. Replies are scripted per model name, so a
test gives each role its own model (`fake-frontline`, `fake-worker`, ...) and decides replies.

Like the servers people run, it can lack features (`refuse`: "json_schema", "tools",
"json_object" answer 400 naming the parameter, as vLLM, llama.cpp or Ollama do), wrap JSON
replies in prose or a code fence (`wrap`: "prose", "fence"), require a key (`api_key`), and
report no usage (`no_usage`: no `usage` object, no usage chunk when streamed).
A structured request asked for as a forced function call (`tool_choice`) gets the script's
JSON back as that function's arguments.

Every reply reports 11 prompt and 7 completion tokens unless `usage_of` says otherwise.

A script is a function of the parsed request returning a `Reply`; a reply with `tool_calls`
comes back as `choices[0].message.tool_calls` with finish_reason "tool_calls" (streamed: as
tool-call deltas, the arguments in pieces).

The frontline's one call (answer, or route: the `route` tool, or a `ROUTE:` line where tools
are refused) is played from a script's two answers: the script is asked the decision (the
request as a `FrontlineDecision` structured request, so `structured(body)` names it) and, for a
direct answer, the answer (the request without tools); the fake renders the route as the call's
convention asks. A script may instead answer the call itself (a `Reply`, with a `route` tool call
or a `ROUTE:` line, or text). The scripts, and the defaults each role starts from, are in the
one library of them, tests/support/scripts.py.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from typing import Any

from services.runtime.base.settings import LLMConfig
from services.runtime.llm import LLMClient
from tests.support.fakes.http import FakeServer, Recorded, Response
from tests.support.fakes.openai_replies import (
    ROUTE_LINE,
    Reply,
    Script,
    one_call,
    play_one_call,
    render_tool_call,
    sse,
    tool_call,
)
from tests.support.scripts import DEFAULTS

__all__ = ["ROUTE_LINE", "FakeOpenAI", "Reply", "Script", "one_call", "tool_call"]


def text_vector(text: str) -> list[float]:
    """A deterministic embedding: the same text gives the same vector, different texts give
    nearly orthogonal ones (a bag of hashed words, so reworded near-duplicates stay close)."""
    dims = 64
    vec = [0.0] * dims
    for word in text.lower().split():
        h = int(hashlib.sha256(word.encode()).hexdigest(), 16)
        vec[h % dims] += 1.0 if (h >> 8) % 2 else -1.0
    return vec


class FakeOpenAI(FakeServer):
    def __init__(self) -> None:
        super().__init__()
        self.scripts: dict[str, Script] = {}
        self.reset()
        self.route("POST", "/v1/chat/completions", self._chat)
        self.route("POST", "/v1/embeddings", self._embeddings)
        self.route("GET", "/v1/models", self._models)
        self.embed: Callable[[str], list[float]] = text_vector

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    def reset(self) -> None:
        super().reset()
        self.refuse: set[str] = set()
        self.wrap: str | None = None
        self.api_key: str | None = None
        self.no_usage = False
        self.embedding_models = ["text-embedding-3-small"]
        # The usage each chat reply reports (prompt, completion tokens), from its request.
        self.usage_of: Callable[[dict[str, Any]], tuple[int, int]] = lambda body: (11, 7)
        self.scripts = dict(DEFAULTS)

    def script(self, model: str, fn: Script) -> None:
        self.scripts[model] = fn

    def client(
        self,
        role: str = "frontline",
        model: str = "fake-frontline",
        *,
        base_url: str | None = None,
        timeout: float = 10,
        retries: int = 0,
        **config: Any,
    ) -> LLMClient:
        """Sidekick's LLM client for `role` on this fake's `model` (`config`: LLMConfig's
        other fields; `base_url`: another server's, for a client that must fail to reach it)."""
        given = LLMConfig(role, base_url or self.base_url, "k", model, **config)
        return LLMClient(given, timeout=timeout, max_retries=retries)

    def chat_calls(self, model: str) -> list[dict[str, Any]]:
        return [c.json() for c in self.calls("/v1/chat/completions") if c.json()["model"] == model]

    def _unauthorized(self, rec: Recorded) -> Response | None:
        headers = {k.lower(): v for k, v in rec.headers.items()}
        if self.api_key is None or headers.get("authorization") == f"Bearer {self.api_key}":
            return None
        error = {
            "message": "Incorrect API key provided.",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_api_key",
        }
        return Response(401, {"error": error})

    def _models(self, rec: Recorded) -> Response:
        denied = self._unauthorized(rec)
        if denied is not None:
            return denied
        names = [*self.scripts, *self.embedding_models]
        data = [{"id": n, "object": "model", "created": 0, "owned_by": "fake"} for n in names]
        return Response(200, {"object": "list", "data": data})

    def _refusal(self, body: dict[str, Any]) -> Response | None:
        """A 400 naming the parameter, as servers without the feature answer."""
        fmt = (body.get("response_format") or {}).get("type")
        if "json_schema" in self.refuse and fmt == "json_schema":
            message, param = (
                "response_format of type json_schema is not supported",
                "response_format",
            )
        elif "json_object" in self.refuse and fmt == "json_object":
            message, param = (
                "response_format of type json_object is not supported",
                "response_format",
            )
        elif "tools" in self.refuse and body.get("tools"):
            message, param = "this model does not support tools", "tools"
        else:
            return None
        error = {"message": message, "type": "invalid_request_error", "param": param}
        return Response(400, {"error": error})

    def _wrapped(self, content: str) -> str:
        if self.wrap == "fence":
            return f"```json\n{content}\n```"
        if self.wrap == "prose":
            return f"Sure! Here is the JSON you asked for:\n{content}\nAnything else?"
        return content

    def _chat(self, rec: Recorded) -> Response:
        body = rec.json()
        model = body["model"]
        denied = self._unauthorized(rec) or self._refusal(body)
        if denied is not None:
            return denied
        script = self.scripts.get(model)
        if script is None:
            return Response(404, {"error": {"message": f"model {model} not found"}})
        how = one_call(body)
        raw = play_one_call(script, body, how) if how is not None else script(body)
        if isinstance(raw, Reply):
            reply = raw
        elif isinstance(raw, dict):
            reply = self._structured_reply(body, raw)
        else:
            reply = Reply(content=raw)
        if reply.wait is not None:
            reply.wait.wait(60)
        if reply.delay:
            time.sleep(reply.delay)
        if reply.status != 200:
            return Response(
                reply.status,
                {"error": {"message": reply.error or "fake error", "type": "server_error"}},
                reply.headers,
            )
        given, taken = self.usage_of(body)
        usage: dict[str, int] | None = {
            "prompt_tokens": given,
            "completion_tokens": taken,
            "total_tokens": given + taken,
        }
        if self.no_usage:
            usage = None
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        finish_reason = "stop"
        if reply.tool_calls:
            message = {
                "role": "assistant",
                "content": reply.content or None,
                "tool_calls": [render_tool_call(c) for c in reply.tool_calls],
            }
            finish_reason = "tool_calls"
        if body.get("stream"):
            return Response(200, chunks=sse(model, reply, usage), chunk_delay=reply.chunk_delay)
        return Response(
            200,
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
                **({"usage": usage} if usage is not None else {}),
            },
        )

    def _structured_reply(self, body: dict[str, Any], value: dict[str, Any]) -> Reply:
        """A JSON reply as the request asked for it: the forced function's arguments, or text
        (wrapped in prose or a fence when `wrap` says so)."""
        choice = body.get("tool_choice")
        if isinstance(choice, dict) and "function" in choice:
            return Reply(tool_calls=[tool_call(choice["function"]["name"], value)])
        return Reply(content=self._wrapped(json.dumps(value)))

    def _embeddings(self, rec: Recorded) -> Response:
        body = rec.json()
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = [
            {"object": "embedding", "index": i, "embedding": self.embed(text)}
            for i, text in enumerate(inputs)
        ]
        return Response(
            200,
            {
                "object": "list",
                "data": data,
                "model": body.get("model", "fake-embed"),
                "usage": {"prompt_tokens": 3, "total_tokens": 3},
            },
        )
