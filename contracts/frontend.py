"""What a client app brings to a request besides the user's words (AG-UI's `RunAgentInput.tools`
and `context`), and the TOOLS worker's conversation carried across a request parked on the
client's tools.

A frontend tool is run by the client, never by Sidekick. The TOOLS worker offers it to the model
beside its own tools, as untrusted (its name, description and schema are the client's; its result
is data), under the operator's approval policy (`<name>` rules, like an MCP tool's). When the
model calls one, the worker stops with the calls (`FrontendStop`), the request parks waiting for
the client (its `ClarificationRequested` carries the calls), and the client's next run answers
with each call's result (`ToolResult`); the next attempt goes on from the same conversation
(`transcript`). Context items reach the models as data in a delimited block, never as the user's
words."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from contracts.base import CallId, Model, ToolName

TOOL_NAME = r"^[A-Za-z0-9_-]{1,64}$"
"""A tool name as OpenAI-style APIs take it."""

SIDEKICK_TOOLS = frozenset(
    {
        "browser_click",
        "browser_links",
        "browser_navigate",
        "browser_text",
        "files_list",
        "files_read",
        "files_write",
        "notify",
        "python_run",
        "web_search",
        "wikipedia_page",
        "wikipedia_search",
    }
)
"""The TOOLS worker's own tools (a test keeps this in step with services/workers/tools/): no
client tool may take one of these names, nor an MCP server tool's `<server>__<tool>` form."""


class FrontendTool(Model):
    """A tool the client runs itself, declared with its run."""

    name: str = Field(pattern=TOOL_NAME, description="The name the model calls it by.")
    description: str = Field(
        default="", max_length=2000, description="What it does, in the client's words."
    )
    parameters: dict[str, Any] = Field(
        default_factory=dict, description="JSON Schema of its arguments (an object)."
    )


class ContextItem(Model):
    """One piece of context the client app sent (data for the models, not instructions)."""

    description: str = Field(max_length=500, description="What it is.")
    value: str = Field(description="Its value.")


class ToolCall(Model):
    """One tool call the model made."""

    call_id: CallId
    name: ToolName
    arguments: str = Field(description="Its arguments, as JSON text.")


class ToolResult(Model):
    """The client's result of one of its tools' calls."""

    call_id: str = Field(description="The call it answers.")
    content: str = Field(description="The result, as the client gave it.")


class LoopMessage(Model):
    """One message of the TOOLS worker's conversation after its prompt: a model turn (its text
    and tool calls) or a tool's result."""

    role: Literal["assistant", "tool"] = Field(description="Who said it.")
    content: str = Field(default="", description="Its text.")
    tool_calls: list[ToolCall] = Field(
        default_factory=list, description="The calls of a model turn."
    )
    tool_call_id: str | None = Field(default=None, description="The call a tool result answers.")


class FrontendStop(Model):
    """Where the TOOLS worker stopped to let the client run its tools."""

    calls: list[ToolCall] = Field(min_length=1, description="The client's tools to run.")
    transcript: list[LoopMessage] = Field(
        description="The conversation after the prompt, up to and with the model turn that "
        "made these calls (and the results of Sidekick's own calls of that turn)."
    )


# The fields these add to the bus's events (contracts/events.py), described once here.


def tools_field() -> Any:
    return Field(
        default_factory=list,
        description="Tools the client runs itself (AG-UI frontend tools, contracts/frontend.py): "
        "the TOOLS worker offers them to the model; a call of one stops the worker "
        "(`WorkerResult.frontend`), and a request that has any is done by the TOOLS worker.",
    )


def context_field() -> Any:
    return Field(
        default_factory=list,
        description="Context the client app sent (AG-UI): data for the models, never the user's "
        "words nor instructions.",
    )


def transcript_field() -> Any:
    return Field(
        default_factory=list,
        description="The TOOLS conversation so far (after the prompt), with the client's results "
        "of its tools' calls: the worker goes on from there.",
    )


def stop_field() -> Any:
    return Field(
        default=None,
        description="The model called tools the client runs itself: the request is parked "
        "until the client's results arrive, then goes on from this conversation.",
    )


def calls_field() -> Any:
    return Field(
        default_factory=list,
        description="Set when the request waits for the client to run these calls of its own "
        "tools (AG-UI frontend tools) and send their results.",
    )


def results_field() -> Any:
    return Field(
        default_factory=list,
        description="The client's results of the tool calls the request waits for.",
    )
