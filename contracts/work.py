"""What a worker is given beside its task (what it may still spend) and reports beside its
answer (the tool calls it made)."""

from __future__ import annotations

from pydantic import Field

from contracts.base import Model


class TaskBudget(Model):
    """What the request may still spend when this attempt starts (its limits less its usage so
    far); a worker that calls a model in a loop checks it before each call."""

    tokens: int = Field(ge=0, description="Model tokens (in + out) the attempt may still use.")
    calls: int = Field(ge=0, description="Model calls the attempt may still make.")
    tool_calls: int | None = Field(
        default=None, ge=0, description="Tool calls the attempt may still make (None: no limit)."
    )


class ToolUse(Model):
    """One tool call the TOOLS worker made, after it ran (arguments and result cut short)."""

    call_id: str = Field(description="The model's id of the call.")
    name: str = Field(description="The tool.")
    arguments: str = Field(description="Its arguments, as JSON text (at most 2,000 characters).")
    result: str = Field(description="What it returned (at most 2,000 characters).")
    ok: bool = Field(description="False when the tool reported an error.")
    attempt: int = Field(ge=1, description="The attempt that made the call.")
