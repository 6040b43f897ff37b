"""What makes a request a replay of a recorded one (carried by its `chat.requested` and
`request.routed`, kept in its record); services/runtime/requests/replays.py says how every hop
treats one."""

from __future__ import annotations

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
