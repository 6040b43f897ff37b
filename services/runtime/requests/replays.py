"""What makes a request a replay, for every hop that must not act in the world for one.

A replay (services/gateway/requests/, `sidekick replay`) is a new request that takes a
recorded one's inputs up to a step and runs live from there. It never performs a
consequential action: the workers' side-effect tools (email, notify, python_run, the tools the
policy has a say over, new browser hosts) show what they would have done instead. Two marks
say "replay", and either one is enough (fail closed): the task's `replay_of` (set from the
request's `replay`, which travels in `chat.requested` and `request.routed`), and the request
id itself, which the gateway gives every replay with the `replay-` prefix, so a hop that lost
the field still sees it on every event of the request."""

from __future__ import annotations

import json

from contracts import LoopState, WorkerTask, new_id

REPLAY_PREFIX = "replay-"


def replay_id() -> str:
    """A fresh request id for a replay (the prefix marks it on every event)."""
    return REPLAY_PREFIX + new_id()


def is_replay(task: WorkerTask) -> bool:
    """Whether the task belongs to a replay (by its field, or by its request id)."""
    return task.replay_of is not None or task.request_id.startswith(REPLAY_PREFIX)


def would_have(action: str, arguments: str | dict[str, str]) -> str:
    """What a replay shows in place of a consequential action: the action and its arguments."""
    shown = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return (
        f"REPLAY: not performed. This is a replay, which never acts in the world; the original "
        f"run would have done {action} with {shown}"
    )


def replay_refusal(original: LoopState | None, what: str, n: int) -> str | None:
    """Why a recorded request cannot be replayed from step `what`:`n` (None: it can)."""
    if original is None or original.decision is None:
        return (
            "The recorded request was never decided by the orchestrator: it cannot be replayed "
            "from a step after the decision."
        )
    if what == "attempt" and n > len(original.attempts) + 1:
        return (
            f"The recorded request made {len(original.attempts)} attempt(s): there is no "
            f"attempt {n} to replay from."
        )
    if what == "evaluation":
        if n > len(original.attempts):
            return (
                f"The recorded request made {len(original.attempts)} attempt(s): attempt {n} "
                "was never evaluated."
            )
        result = original.attempts[n - 1].result
        if result is None or not result.success:
            return f"Attempt {n} of the recorded request produced no output to evaluate."
    return None
