"""What a tool is, and the toolbox that runs the model's calls.

A tool is a name, a description, a Pydantic model of its arguments (its JSON Schema is what the
model sees) and an async function. A class of tools (a `Toolset`) marks each of its methods
`async def m(self, args: SomeArgs, call: Call) -> str` with `@tool(name, description)`, and its
`tools()` binds them. The toolbox validates the model's arguments, runs the tool under a time
limit, and turns every failure into a tool result the model can read: a bad call must never end
the loop, and nothing a tool fetched ever reaches a system prompt.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, get_type_hints

from opentelemetry import trace
from pydantic import BaseModel, ConfigDict, ValidationError

from contracts import Source
from services.runtime.base.metrics import counter
from services.workers.tools.errors import ToolArgumentsError, ToolError
from services.workers.tools.hosts import Hosts

log = logging.getLogger("sidekick.workers.tools")
_tracer = trace.get_tracer("sidekick.tools")

TOOL_CALLS = counter(
    "sidekick_tool_calls_total",
    "Tool calls made by the TOOLS worker, by tool and outcome.",
    ["tool", "outcome"],
)


class Args(BaseModel):
    """Base of every tool's arguments: unknown arguments are an error the model is told about."""

    model_config = ConfigDict(extra="forbid")


A = TypeVar("A", bound=Args)


@dataclass
class RunContext:
    """One task's run: who it is for, the sources its tools read, the hosts its browser opened
    (and the policy's ruling on a new one), what to close after."""

    request_id: str
    session_id: str
    attempt: int
    sources: list[Source] = field(default_factory=list)
    hosts: Hosts = field(default_factory=Hosts)
    _closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    def add_source(self, source: Source) -> None:
        if all(s.url != source.url for s in self.sources):
            self.sources.append(source)

    def on_close(self, closer: Callable[[], Awaitable[None]]) -> None:
        self._closers.append(closer)

    async def close(self) -> None:
        while self._closers:
            closer = self._closers.pop()
            try:
                await closer()
            except Exception:  # closing must not hide the result
                log.warning("closing a tool resource failed", exc_info=True)


@dataclass(frozen=True)
class Call:
    """One tool call: the run it belongs to and the model's id for it."""

    run: RunContext
    call_id: str


class Invocable(Protocol):
    """What the toolbox runs: a built-in `Tool`, or a tool of an MCP server."""

    @property
    def name(self) -> str: ...

    def definition(self) -> dict[str, Any]: ...

    async def invoke(self, arguments: str, call: Call) -> str: ...


def parse_arguments(arguments: str) -> dict[str, Any]:
    """The model's arguments as a JSON object, or a ToolArgumentsError it can read."""
    try:
        data = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError as exc:
        raise ToolArgumentsError(f"the arguments are not valid JSON ({exc.msg}).") from exc
    if not isinstance(data, dict):
        raise ToolArgumentsError("the arguments must be a JSON object.")
    return data


@dataclass(frozen=True)
class Tool(Generic[A]):
    name: str
    description: str
    args: type[A]
    fn: Callable[[A, Call], Awaitable[str]]

    def definition(self) -> dict[str, Any]:
        """The OpenAI function tool definition."""
        schema = self.args.model_json_schema()
        _strip_titles(schema)
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": schema},
        }

    def validate(self, arguments: str) -> A:
        """The model's arguments as the tool's model, or a ToolArgumentsError it can read."""
        data = parse_arguments(arguments)
        try:
            return self.args.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}"
                for e in exc.errors()[:5]
            )
            raise ToolArgumentsError(f"invalid arguments for {self.name}: {problems}.") from exc

    async def invoke(self, arguments: str, call: Call) -> str:
        return await self.fn(self.validate(arguments), call)


F = TypeVar("F", bound=Callable[..., Awaitable[str]])

_MARK = "_sidekick_tool"


def tool(name: str, description: str) -> Callable[[F], F]:
    """Mark a method as the tool `name`; its `args` parameter's type is the arguments' model."""

    def mark(method: F) -> F:
        setattr(method, _MARK, (name, description))
        return method

    return mark


def tools_of(owner: object) -> list[Tool[Any]]:
    """The methods of `owner`'s class marked with @tool, bound to `owner`, in definition order."""
    found: list[Tool[Any]] = []
    for attr, method in vars(type(owner)).items():
        marked = getattr(method, _MARK, None)
        if marked is not None:
            name, description = marked
            args = get_type_hints(method)["args"]
            found.append(Tool(name, description, args, getattr(owner, attr)))
    return found


class Toolset:
    """A class whose methods marked with @tool are offered to the model."""

    def tools(self) -> list[Tool[Any]]:
        return tools_of(self)


@dataclass(frozen=True)
class Outcome:
    """What goes back to the model as the tool message."""

    content: str
    ok: bool


class ToolBox:
    def __init__(
        self, tools: Sequence[Invocable], *, result_chars: int, call_timeout: float
    ) -> None:
        self._tools = {t.name: t for t in tools}
        self.result_chars = result_chars
        self.call_timeout = call_timeout

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def get(self, name: str) -> Invocable | None:
        return self._tools.get(name)

    @property
    def definitions(self) -> list[dict[str, Any]]:
        return [t.definition() for t in self._tools.values()]

    def refusal(self, name: str, arguments: str) -> str | None:
        """Why a built-in tool would refuse these arguments before doing anything (None: it
        would not, or it is not a built-in tool), so no one is asked to approve a call that
        cannot run."""
        tool = self._tools.get(name)
        if not isinstance(tool, Tool):
            return None
        try:
            tool.validate(arguments)
        except ToolArgumentsError as exc:
            return f"ERROR: {exc}"
        return None

    async def call(self, name: str, arguments: str, call: Call) -> Outcome:
        tool = self._tools.get(name)
        if tool is None:
            TOOL_CALLS.labels("unknown", "error").inc()
            return Outcome(
                f"ERROR: there is no tool named {name!r}; the tools are: {', '.join(self.names)}.",
                ok=False,
            )
        with _tracer.start_as_current_span(
            f"execute_tool {name}",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": name,
                "gen_ai.tool.call.id": call.call_id,
            },
        ) as span:
            try:
                async with asyncio.timeout(self.call_timeout):
                    text = await tool.invoke(arguments, call)
                ok = True
            except TimeoutError:
                text, ok = f"ERROR: {name} did not finish within {self.call_timeout:g}s.", False
            except ToolError as exc:
                text, ok = f"ERROR: {exc}", False
            except Exception as exc:  # a bug in a tool is reported, not fatal to the task
                log.exception("tool %s failed on %s", name, call.run.request_id)
                text, ok = f"ERROR: the {name} tool failed unexpectedly: {exc!r}", False
            if not ok:
                span.set_status(trace.Status(trace.StatusCode.ERROR, text[:200]))
        TOOL_CALLS.labels(name, "ok" if ok else "error").inc()
        return Outcome(truncate(text, self.result_chars), ok)


def truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... truncated: {len(text) - limit} more characters]"


def _strip_titles(node: Any) -> None:
    if isinstance(node, dict):
        # A schema's "title" is a string; a property that happens to be called title is a dict.
        if isinstance(node.get("title"), str):
            del node["title"]
        for value in node.values():
            _strip_titles(value)
    elif isinstance(node, list):
        for item in node:
            _strip_titles(item)
