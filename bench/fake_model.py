"""A fast fake OpenAI-compatible model for the benches: raw asyncio HTTP/1.1 (keep-alive,
chunked SSE), run in its own process so it never competes with the load generator's loop.

Replies are chosen by the request's model name (the bench sets `SIDEKICK_<ROLE>_LLM_MODEL` to
`bench-<role>`) and by markers in the user's message:

- `bench-frontline`: the frontline's one streamed call: when the message has `#orch`, a call of
  the `route` tool (or a `ROUTE:` line, when the request offers no tools); otherwise a short
  answer whose first token is `t0=<CLOCK_MONOTONIC ns>`, stamped just before the token is
  written, so a client on the same machine can tell how long the token took to reach it;
- `bench-orchestrator`: `{"worker_type": "GENERAL", ...}` with the request as the task;
- `bench-worker`: `ATTEMPT=<n> done.` where n is read from the retry context ("This is attempt n.");
- `bench-evaluator`: a verdict that fails attempts 1..k when the request carries `#fail<k>`,
  and, when it carries `#ask`, asks the user one question until the prompt holds their answer.

`/v1/embeddings` answers a deterministic unit vector per text (1536 dimensions, like
text-embedding-3-small; different texts are near-orthogonal, so the semantic cache misses).

`POST /bench/config {"latency_ms": .., "token_gap_ms": .., "one_delta": ..}` changes the reply
latency at run time (`one_delta`: a streamed answer is written as one delta, so what a client
receives does not depend on how fast the machine reads it); `GET /bench/stats` returns calls
per model. Run: `python -m bench.fake_model --port 0` prints
`listening on <port>` once ready.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import random
import re
import signal
import struct
import sys
import time
from collections import Counter
from typing import Any, cast

from services.runtime.base.eventloop import run_loop as run_fast

ATTEMPT_IN_PROMPT = re.compile(r"This is attempt (\d+)\.")
ATTEMPT_IN_OUTPUT = re.compile(r"ATTEMPT=(\d+)")
FAIL_MARK = re.compile(r"#fail(\d+)")
ASK_MARK = "#ask"
ANSWERED = "The user already answered these questions"
ANSWER_WORDS = ["Hello!", "How", "can", "I", "help", "you", "today?"]
USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
EMBEDDING_DIMS = 1536


def last_user(body: dict[str, Any]) -> str:
    """The text of a chat request's last user message (JSON, when it is a list of parts);
    tests/support/fakes reads requests with it too."""
    for message in reversed(body.get("messages", [])):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


def section(text: str, title: str) -> str:
    """The part of an evaluator prompt under `title:` up to the next blank line."""
    start = text.find(title + ":\n")
    if start < 0:
        return ""
    start += len(title) + 2
    end = text.find("\n\n", start)
    return text[start:] if end < 0 else text[start:end]


def frontline_routes(body: dict[str, Any]) -> bool:
    return "#orch" in last_user(body)


def one_call(body: dict[str, Any]) -> bool:
    """The frontline's answer-or-route call: the `route` tool offered, or the `ROUTE:` line
    asked for in the system prompt."""
    if body.get("tools"):
        return True
    system = [m.get("content") for m in body.get("messages", []) if m.get("role") == "system"]
    return any("`ROUTE: <" in str(text) for text in system)


def orchestrator_decision(body: dict[str, Any]) -> dict[str, Any]:
    text = last_user(body)
    request = section(text, "User request") or text
    return {
        "worker_type": "GENERAL",
        "task_description": "Do: " + request,
        "parameters": [],
        "success_criteria": "A clear answer.",
    }


def worker_answer(body: dict[str, Any]) -> str:
    m = ATTEMPT_IN_PROMPT.search(last_user(body))
    return f"ATTEMPT={m.group(1) if m else 1} done."


def verdict(body: dict[str, Any]) -> dict[str, Any]:
    text = last_user(body)
    if ASK_MARK in section(text, "User's request") and ANSWERED not in text:
        return {
            "passed": False,
            "score": 30,
            "feedback": "It depends on where the user is.",
            "suggestions": [],
            "user_input_needed": True,
            "questions": ["Which city are you in?"],
        }
    fail = FAIL_MARK.search(section(text, "User's request"))
    attempt = ATTEMPT_IN_OUTPUT.search(section(text, "Worker's output"))
    n = int(attempt.group(1)) if attempt else 1
    passed = fail is None or n > int(fail.group(1))
    return {
        "passed": passed,
        "score": 90 if passed else 40,
        "feedback": "Good." if passed else "Not yet: be more specific.",
        "suggestions": [] if passed else ["Be more specific."],
        "user_input_needed": False,
        "questions": [],
    }


def reply_for(model: str, body: dict[str, Any]) -> str:
    role = model.removeprefix("bench-")
    if role == "frontline":
        route = frontline_routes(body)
        return json.dumps({"route_to_orchestrator": route, "reason": "tools"})
    if role == "orchestrator":
        return json.dumps(orchestrator_decision(body))
    if role == "worker":
        return worker_answer(body)
    if role == "evaluator":
        return json.dumps(verdict(body))
    return "Hello from the bench model."


def embedding(text: str, dims: int) -> list[float]:
    rng = random.Random(hashlib.sha256(text.encode()).digest())
    v = [rng.gauss(0.0, 1.0) for _ in range(dims)]
    norm = sum(x * x for x in v) ** 0.5 or 1.0
    return [x / norm for x in v]


def embeddings_reply(body: dict[str, Any]) -> dict[str, Any]:
    raw = body.get("input", "")
    texts = raw if isinstance(raw, list) else [raw]
    data = []
    for i, text in enumerate(texts):
        vector: list[float] | str = embedding(str(text), EMBEDDING_DIMS)
        if body.get("encoding_format") == "base64":
            vector = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
        data.append({"object": "embedding", "index": i, "embedding": vector})
    usage = {"prompt_tokens": 3, "total_tokens": 3}
    return {"object": "list", "data": data, "model": body.get("model", ""), "usage": usage}


class Model:
    """Shared state of the fake: latency knobs and call counts."""

    def __init__(self, latency: float, token_gap: float) -> None:
        self.latency = latency
        self.token_gap = token_gap
        self.one_delta = False
        self.calls: Counter[str] = Counter()


def _head(status: int, headers: list[tuple[str, str]]) -> bytes:
    reason = {200: "OK", 404: "Not Found", 400: "Bad Request"}.get(status, "OK")
    lines = [f"HTTP/1.1 {status} {reason}"] + [f"{k}: {v}" for k, v in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _json_response(status: int, payload: Any) -> bytes:
    data = json.dumps(payload).encode()
    head = _head(status, [("content-type", "application/json"), ("content-length", str(len(data)))])
    return head + data


def _sse(data: dict[str, Any] | str) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data)
    payload = f"data: {text}\n\n".encode()
    return f"{len(payload):x}\r\n".encode() + payload + b"\r\n"


class Connection(asyncio.Protocol):
    """One client connection; requests on it are answered in order (no pipelining needed)."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.busy: asyncio.Task[None] | None = None
        self.pending: list[tuple[str, str, bytes]] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self.busy is not None:
            self.busy.cancel()

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buf[:end]).decode("latin-1").split("\r\n")
            length = 0
            for line in head[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            if len(self.buf) < end + 4 + length:
                return
            body = bytes(self.buf[end + 4 : end + 4 + length])
            del self.buf[: end + 4 + length]
            method, path, _ = head[0].split(" ", 2)
            self.pending.append((method, path.split("?")[0], body))
            if self.busy is None:
                self.busy = asyncio.get_running_loop().create_task(self._serve())

    async def _serve(self) -> None:
        try:
            while self.pending and self.transport is not None:
                method, path, body = self.pending.pop(0)
                await self._handle(method, path, body)
        finally:
            self.busy = None

    def _write(self, data: bytes) -> None:
        if self.transport is not None:
            self.transport.write(data)

    async def _handle(self, method: str, path: str, raw: bytes) -> None:
        if method == "POST" and path == "/v1/chat/completions":
            await self._chat(json.loads(raw))
        elif method == "POST" and path == "/v1/embeddings":
            self.model.calls["embeddings"] += 1
            if self.model.latency > 0:
                await asyncio.sleep(self.model.latency)
            self._write(_json_response(200, embeddings_reply(json.loads(raw))))
        elif method == "GET" and path == "/bench/stats":
            self._write(_json_response(200, {"calls": dict(self.model.calls)}))
        elif method == "POST" and path == "/bench/config":
            config = json.loads(raw or b"{}")
            if "latency_ms" in config:
                self.model.latency = float(config["latency_ms"]) / 1000
            if "token_gap_ms" in config:
                self.model.token_gap = float(config["token_gap_ms"]) / 1000
            if "one_delta" in config:
                self.model.one_delta = bool(config["one_delta"])
            self._write(_json_response(200, {"ok": True}))
        elif method == "GET" and path == "/v1/models":
            self._write(_json_response(200, {"object": "list", "data": []}))
        else:
            self._write(_json_response(404, {"error": {"message": f"no route {path}"}}))

    async def _chat(self, body: dict[str, Any]) -> None:
        model = str(body.get("model", ""))
        self.model.calls[model] += 1
        if self.model.latency > 0:
            await asyncio.sleep(self.model.latency)
        if body.get("stream"):
            if model == "bench-frontline" and frontline_routes(body) and one_call(body):
                await self._route(model, tools=bool(body.get("tools")))
            else:
                await self._stream(model)
            return
        content = reply_for(model, body)
        self._write(
            _json_response(
                200,
                {
                    "id": "chatcmpl-bench",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": content},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": USAGE,
                },
            )
        )

    async def _route(self, model: str, *, tools: bool) -> None:
        """The frontline's route: a streamed `route` tool call, or a `ROUTE:` line."""
        base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0}
        base["model"] = model

        def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
            return _sse(
                {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            )

        head = [("content-type", "text/event-stream"), ("transfer-encoding", "chunked")]
        out = _head(200, head) + event({"role": "assistant"})
        if tools:
            call = {"index": 0, "id": "call_bench", "type": "function"}
            out += event({"tool_calls": [{**call, "function": {"name": "route", "arguments": ""}}]})
            for part in ('{"reason": ', '"tools"}'):
                out += event({"tool_calls": [{"index": 0, "function": {"arguments": part}}]})
            out += event({}, "tool_calls")
        else:
            out += event({"content": "ROUTE: tools"}) + event({}, "stop")
        out += _sse({**base, "choices": [], "usage": USAGE})
        self._write(out + _sse("[DONE]") + b"0\r\n\r\n")

    async def _stream(self, model: str) -> None:
        base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0}
        base["model"] = model

        def delta(d: dict[str, str], finish: str | None = None) -> bytes:
            return _sse({**base, "choices": [{"index": 0, "delta": d, "finish_reason": finish}]})

        head = [("content-type", "text/event-stream"), ("transfer-encoding", "chunked")]
        self._write(_head(200, head) + delta({"role": "assistant"}))
        gap = self.model.token_gap
        if self.model.one_delta:
            self._write(delta({"content": " ".join(ANSWER_WORDS)}))
        else:
            # The stamp is taken as late as possible: right before the first token is written.
            self._write(delta({"content": f"t0={time.monotonic_ns()} "}))
        for i, word in enumerate([] if self.model.one_delta else ANSWER_WORDS):
            if gap > 0:
                await asyncio.sleep(gap)
            self._write(delta({"content": word + (" " if i < len(ANSWER_WORDS) - 1 else "")}))
        tail = delta({}, "stop") + _sse({**base, "choices": [], "usage": USAGE})
        self._write(tail + _sse("[DONE]") + b"0\r\n\r\n")


async def serve(port: int, latency: float, token_gap: float) -> None:
    model = Model(latency, token_gap)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Connection(model), "127.0.0.1", port, backlog=4096)
    bound = server.sockets[0].getsockname()[1]
    print(f"listening on {bound}", flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fake_model", description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--token-gap-ms", type=float, default=0.0)
    args = parser.parse_args(argv)
    run_fast(serve(args.port, args.latency_ms / 1000, args.token_gap_ms / 1000))
    return 0


if __name__ == "__main__":
    sys.exit(main())
