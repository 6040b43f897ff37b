"""What the attempt loop knows about one request: the attempts so far, the decision, the
verdicts, the open questions (`LoopState`, kept in the request's record: contracts/state.py).
Folded by `loop.py`, projected into messages by `projection.py`."""

from __future__ import annotations

from contracts.state import Attempt, LoopState, LoopStatus

Status = LoopStatus
MAX_CLARIFICATION_ROUNDS = 2
# How many times one request may stop for its client's own tools (AG-UI frontend tools).
MAX_TOOL_ROUNDS = 10
# Kinds whose success is a side effect in the world (a sent email): judging it afterwards could
# only lead to a second send, so a successful result ends the request.
SIDE_EFFECT_WORKERS = frozenset({"EMAIL"})

__all__ = [
    "MAX_CLARIFICATION_ROUNDS",
    "MAX_TOOL_ROUNDS",
    "SIDE_EFFECT_WORKERS",
    "Attempt",
    "LoopState",
    "Status",
]
