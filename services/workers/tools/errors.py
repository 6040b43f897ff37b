"""Errors a tool reports to the model. They become the tool's result (the loop goes on), so
their message says what went wrong and, where it can, what to do instead.

ToolError                 a tool could not do what was asked; `str()` is shown to the model
 +-- ToolNotConfigured    the tool's key or binary is missing; names the variables to set
 +-- ToolArgumentsError   the model's arguments were not valid JSON or did not fit the schema
 +-- PathRefused          a files_* path would leave the session's sandbox folder
 +-- ToolUnavailable      the outside service failed (timeout, 5xx, unreachable)
"""

from __future__ import annotations


class ToolError(Exception):
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
