"""What a worker is given beside its task: what the request may still spend."""

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
