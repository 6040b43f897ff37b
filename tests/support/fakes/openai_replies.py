"""What the fake OpenAI API answers with: a scripted `Reply`, rendered as a JSON completion or as
server-sent events (text deltas, then tool-call deltas with the arguments in pieces), and the
frontline's one call (answer, or route) played from a script written for its two questions
(tests/support/fakes/openai_server.py says how)."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Reply:
    content: str = ""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    error: str | None = None
    wait: threading.Event | None = None  # block until set (for crash tests)
    chunk_delay: float = 0.0
    # Function calls the model asks for: each {"id", "name", "arguments"} (arguments a dict or
    # JSON text) or the API's own {"id", "type": "function", "function": {...}} shape.
    tool_calls: list[dict[str, Any]] | None = None


def tool_call(name: str, arguments: dict[str, Any], call_id: str | None = None) -> dict[str, Any]:
    """One tool call of a scripted reply."""
    return {"id": call_id or f"call_{uuid.uuid4().hex[:12]}", "name": name, "arguments": arguments}


def render_tool_call(call: dict[str, Any]) -> dict[str, Any]:
    if "function" in call:
        return {"type": "function", **call}
    args = call.get("arguments", {})
    return {
        "id": call["id"],
        "type": "function",
        "function": {
            "name": call["name"],
            "arguments": args if isinstance(args, str) else json.dumps(args),
        },
    }


Script = Callable[[dict[str, Any]], Reply | str | dict[str, Any]]


ROUTE_LINE = "`ROUTE: <"  # the marker convention's instruction (services/frontline/prompts.py)


def one_call(body: dict[str, Any]) -> str | None:
    """'tools' or 'marker' when the request is the frontline's answer-or-route call."""
    for t in body.get("tools") or []:
        if (t.get("function") or {}).get("name") == "route" and body.get("tool_choice") in (
            None,
            "auto",
        ):
            return "tools"
    for m in body.get("messages", []):
        if m.get("role") == "system" and ROUTE_LINE in str(m.get("content")):
            return "marker"
    return None


def decision_view(body: dict[str, Any]) -> dict[str, Any]:
    """The one call as the frontline's old first question: a structured decision."""
    view = {k: v for k, v in body.items() if k not in ("tools", "tool_choice", "stream")}
    view["response_format"] = {
        "type": "json_schema",
        "json_schema": {"name": "FrontlineDecision", "schema": {}, "strict": True},
    }
    return view


def answer_view(body: dict[str, Any]) -> dict[str, Any]:
    """The one call as the frontline's old second question: the answer, streamed."""
    return {k: v for k, v in body.items() if k not in ("tools", "tool_choice")}


def _decision(reply: Reply | str | dict[str, Any]) -> dict[str, Any] | None:
    """A script's answer to the decision question, as a FrontlineDecision-shaped dict."""
    value: Any = reply
    if isinstance(reply, Reply):
        value = reply.content
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if isinstance(value, dict) and isinstance(value.get("route_to_orchestrator"), bool):
        return value
    return None


def route_reply(how: str, reason: str) -> Reply:
    if how == "tools":
        return Reply(tool_calls=[tool_call("route", {"reason": reason})])
    return Reply(f"ROUTE: {reason}")


def play_one_call(script: Script, body: dict[str, Any], how: str) -> Reply | str:
    """The frontline's one call, from a script: the decision asked first, then the answer."""
    first = script(decision_view(body))
    decision = _decision(first)
    if decision is not None:
        if decision["route_to_orchestrator"]:
            routed = route_reply(how, str(decision.get("reason") or "routed"))
            if isinstance(first, Reply):  # keep the script's timing and holds
                routed.delay, routed.wait = first.delay, first.wait
            return routed
        answer = script(answer_view(body))
        if isinstance(answer, dict):
            return json.dumps(answer)
        return answer
    if isinstance(first, dict):
        return json.dumps(first)
    return first


def sse(model: str, reply: Reply, usage: dict[str, int] | None) -> list[bytes]:
    """A reply as the events of a streamed completion."""

    def event(data: dict[str, Any]) -> bytes:
        return f"data: {json.dumps(data)}\n\n".encode()

    words = reply.content.split(" ")
    pieces = [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]
    base = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
    }
    out = [
        event(
            {
                **base,
                "choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}],
            }
        )
    ]
    for piece in pieces if reply.content else []:
        out.append(
            event(
                {
                    **base,
                    "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}],
                }
            )
        )
    for index, call in enumerate(render_tool_call(c) for c in reply.tool_calls or []):
        args = call["function"]["arguments"]
        half = len(args) // 2
        head = {**call, "index": index, "function": {**call["function"], "arguments": ""}}
        for delta in (
            head,
            {"index": index, "function": {"arguments": args[:half]}},
            {"index": index, "function": {"arguments": args[half:]}},
        ):
            choice = {"index": 0, "delta": {"tool_calls": [delta]}, "finish_reason": None}
            out.append(event({**base, "choices": [choice]}))
    finish = "tool_calls" if reply.tool_calls else "stop"
    out.append(event({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}))
    if usage is not None:  # a server that reports no usage sends no usage chunk
        out.append(event({**base, "choices": [], "usage": usage}))
    out.append(b"data: [DONE]\n\n")
    return out
