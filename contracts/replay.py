"""What makes a request a replay of a recorded one (carried by its `chat.requested` and
`request.routed`, kept in its record); services/runtime/requests/replays.py says how every hop
treats one."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from contracts.base import Model

REPLAY_STEP_PATTERN = r"^(decision|attempt:[1-9][0-9]?|evaluation:[1-9][0-9]?)$"
REPLAY_ROLES = ("orchestrator", "worker", "evaluator")


class Replay(Model):
    """What makes a request a replay of a recorded one: it takes the original's recorded inputs
    up to `from_step` (its route; its decision; its attempts before the one replayed) and runs
    live from there. A replay performs no consequential action: every worker that sees it (on
    its task, `WorkerTask.replay_of`, or in the request id's `replay-` prefix) shows what it
    would have done instead (docs/inspect.md)."""

    of: str = Field(description="The recorded request replayed.")
    from_step: str = Field(
        pattern=REPLAY_STEP_PATTERN,
        description="Where the live part starts: 'decision', 'attempt:N' or 'evaluation:N'.",
    )
    reason: str = Field(default="", description="The original's route reason (recorded).")
    models: dict[str, str] = Field(
        default_factory=dict,
        description="A model per role for the live part (orchestrator, worker, evaluator); a "
        "role not named uses its configured model.",
    )


def replay_field() -> Any:
    """`RequestOptions.replay`."""
    return Field(
        default=None,
        description="Set when the request replays a recorded one (never routed by a model: the "
        "recorded route stands).",
    )


def replay_of_field() -> Any:
    """`WorkerTask.replay_of`."""
    return Field(
        default=None,
        description="Set on a replay's task (the recorded request it replays): the worker "
        "performs no consequential action (email, notify, python_run, asked-about tools, new "
        "browser hosts) and says what it would have done; reads run.",
    )


def model_field(role: str) -> Any:
    """A task's `model`: the one a replay asked `role` to use."""
    return Field(
        default=None, description=f"The model to use instead of the {role}'s own (a replay's)."
    )


def tool_calls_field() -> Any:
    """`WorkerResult.tool_calls`."""
    return Field(
        default_factory=list,
        description="The tool calls the worker made, in order (TOOLS), kept for the request's "
        "timeline.",
    )
