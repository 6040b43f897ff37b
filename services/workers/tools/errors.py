"""Errors a tool reports to the model. They become the tool's result (the loop goes on), so
their message says what went wrong and, where it can, what to do instead. The tree is drawn
once, with every other error class, in services/runtime/base/errors.py."""

from __future__ import annotations

from services.runtime.base.errors import SidekickError


class ToolError(SidekickError):
    """A failure to tell the model about; the loop continues."""


class ToolNotConfigured(ToolError):
    def __init__(self, tool: str, what: str) -> None:
        self.tool = tool
        super().__init__(f"The {tool} tool is not configured: {what}")


class ToolArgumentsError(ToolError):
    pass


class PathRefused(ToolError):
    def __init__(self, path: str, why: str) -> None:
        self.path = path
        super().__init__(f"Refused path {path!r}: {why}")


class ToolUnavailable(ToolError):
    pass
