"""What an AG-UI run brings besides the user's words, read and checked at the door: its frontend
tools (`tools`), its `context`, the results of its frontend tools' calls (`tool` messages),
Sidekick's own `forwardedProps` (`sidekick.lastEventId`, `sidekick.cancelOnDisconnect`), and
where a client re-attaches from. `state` is not read (docs/protocols.md says so).

A frontend tool may not take the name of one of Sidekick's own tools, nor an MCP-style
`<server>__<tool>` name: it can never stand in for one (the TOOLS worker also leaves out any
client tool named like a tool it has, services/workers/tools/frontend.py)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import RunAgentInput, ToolMessage, UserMessage
from pydantic import ValidationError
from starlette.requests import Request

from contracts import Turn
from contracts.frontend import SIDEKICK_TOOLS, ContextItem, FrontendTool, ToolResult
from services.gateway.core.errors import Invalid

EVENT_ID = re.compile(r"^(\d{1,19})\.(\d{1,6})$")
MAX_TOOLS = 32  # frontend tools one run may declare
MAX_SCHEMA_CHARS = 8000  # one tool's parameters, as JSON
MAX_CONTEXT = 20  # context items one run may send

Position = tuple[int, int]  # an event id: (stream sequence, index within the stored event)


@dataclass(frozen=True)
class Extras:
    """A run's frontend tools and context, and how it wants its stream."""

    tools: list[FrontendTool] = field(default_factory=list)
    context: list[ContextItem] = field(default_factory=list)
    position: Position | None = None  # re-attach after this event id
    cancel_on_disconnect: bool = False


def extras(request: Request, body: RunAgentInput, max_chars: int) -> Extras:
    """The run's extras, or Invalid saying what is wrong with them."""
    props = sidekick_props(body.forwarded_props)
    cancel = props.get("cancelOnDisconnect", False)
    if not isinstance(cancel, bool):
        raise Invalid("forwardedProps.sidekick.cancelOnDisconnect must be true or false.")
    return Extras(
        tools=frontend_tools(body),
        context=context_items(body, max_chars),
        position=position_of(request, props.get("lastEventId")),
        cancel_on_disconnect=cancel,
    )


def sidekick_props(forwarded: Any) -> dict[str, Any]:
    """`forwardedProps.sidekick` (an object, or nothing)."""
    if forwarded is None:
        return {}
    if not isinstance(forwarded, dict):
        raise Invalid("forwardedProps must be an object.")
    props = forwarded.get("sidekick", {})
    if not isinstance(props, dict):
        raise Invalid("forwardedProps.sidekick must be an object.")
    return props


def position_of(request: Request, given: object = None) -> Position | None:
    """Where a client re-attaches from: `forwardedProps.sidekick.lastEventId` (what
    @ag-ui/client users send: its SSE parser drops `id:` lines), the `Last-Event-ID` header, or
    `?lastEventId=`; None: from the start."""
    if given is not None and not isinstance(given, str):
        raise Invalid("forwardedProps.sidekick.lastEventId must be a string (an event id).")
    raw = given or request.headers.get("last-event-id") or request.query_params.get("lastEventId")
    if not raw:
        return None
    found = EVENT_ID.match(raw.strip())
    if found is None:
        raise Invalid("Last-Event-ID is not an id this endpoint gave (<sequence>.<n>).")
    return int(found.group(1)), int(found.group(2))


def frontend_tools(body: RunAgentInput) -> list[FrontendTool]:
    declared = body.tools or []
    if len(declared) > MAX_TOOLS:
        raise Invalid(f"A run may declare at most {MAX_TOOLS} tools.")
    out: list[FrontendTool] = []
    for n, tool in enumerate(declared):
        where = f"tools[{n}]"
        if tool.name in SIDEKICK_TOOLS or "__" in tool.name:
            raise Invalid(
                f"{where}: the name {tool.name[:64]!r} is taken by Sidekick's own tools (or is "
                "an MCP server's tool name, <server>__<tool>); name the app's tool otherwise."
            )
        parameters = tool.parameters if tool.parameters is not None else {}
        if not isinstance(parameters, dict) or parameters.get("type", "object") != "object":
            raise Invalid(f"{where}.parameters must be a JSON Schema of an object.")
        if len(json.dumps(parameters)) > MAX_SCHEMA_CHARS:
            raise Invalid(f"{where}.parameters is over {MAX_SCHEMA_CHARS} characters.")
        try:
            spec = FrontendTool(name=tool.name, description=tool.description, parameters=parameters)
        except ValidationError as exc:
            problem = exc.errors()[0]
            raise Invalid(f"{where}.{problem['loc'][0]}: {problem['msg']}") from exc
        if any(t.name == spec.name for t in out):
            raise Invalid(f"{where}: the tool {spec.name!r} is declared twice.")
        out.append(spec)
    return out


def context_items(body: RunAgentInput, max_chars: int) -> list[ContextItem]:
    sent = body.context or []
    if len(sent) > MAX_CONTEXT:
        raise Invalid(f"A run may send at most {MAX_CONTEXT} context items.")
    if sum(len(c.value) + len(c.description) for c in sent) > max_chars:
        raise Invalid(f"context is limited to {max_chars} characters in all.")
    try:
        return [ContextItem(description=c.description, value=c.value) for c in sent]
    except ValidationError as exc:
        raise Invalid(f"context: {exc.errors()[0]['msg']}") from exc


def tool_results(body: RunAgentInput, max_chars: int) -> list[ToolResult]:
    """The results the run carries: its trailing `tool` messages (after its last other
    message), one per toolCallId."""
    trailing: list[ToolMessage] = []
    for message in reversed(body.messages):
        if not isinstance(message, ToolMessage):
            break
        trailing.insert(0, message)
    out = []
    for message in trailing:
        content = message.content or ""
        if message.error:  # the app says its tool failed
            content = f"ERROR: {message.error}\n{content}".strip()
        if len(content) > max_chars:
            raise Invalid(f"A tool result is limited to {max_chars} characters.")
        out.append(ToolResult(call_id=message.tool_call_id, content=content))
    return out


def said(body: RunAgentInput) -> tuple[str, list[Turn]]:
    """The run's last user message as text, and the user and assistant turns before it."""
    turns: list[Turn] = []
    for message in body.messages:
        role = getattr(message, "role", "")
        content = getattr(message, "content", None)
        text = content if isinstance(content, str) else _parts_text(content)
        if role in ("user", "assistant") and text:
            turns.append(Turn(role=role, content=text))
    users = [n for n, m in enumerate(body.messages) if isinstance(m, UserMessage)]
    if not users or not turns or turns[-1].role != "user":
        return "", turns
    last = turns.pop()
    return last.content.strip(), turns


def _parts_text(content: object) -> str:
    if not isinstance(content, list):
        return ""
    return "\n".join(str(getattr(p, "text", "")) for p in content if getattr(p, "text", None))
