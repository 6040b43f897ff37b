"""Messages between roles that cannot be forged or silenced.

Every request's loop state has a `secret` (state.py) that is never stored nor sent: the
orchestrator derives it from its own login secret, which no other role holds, and the request
(store.py). From it come, per attempt:
- the dispatch tokens sent with a worker's task and an evaluation request: an answer is taken
  only if it carries its message's token back, is for the attempt in progress and (a worker's
  result) is of the kind dispatched; the kind a sender claims is never believed on its own;
- the dedupe keys (`Nats-Msg-Id`) of the orchestrator's publishes, which no other role can
  compute: the WORK stream drops a second message with a key it has seen, on any subject, so a
  predictable key (`<request>:evaluate:1`) let any role publish first and silence the real one.
The answers' own keys are derived from their tokens (`bus.core.answer_key`), so they too are
unknown to everyone but the orchestrator and the one service it asked.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Callable
from typing import TypeVar

from contracts import VerdictIssued, WorkerResult
from services.orchestrator.state import LoopState

DIGITS = 32
log = logging.getLogger("sidekick.orchestrator")


def _mac(state: LoopState, what: str) -> str:
    digest = hmac.new(state.secret.encode(), what.encode(), hashlib.sha256).hexdigest()
    return digest[:DIGITS]


def token(state: LoopState, step: str, attempt: int) -> str:
    """The proof sent with attempt `attempt`'s `step` ("task" or "evaluate")."""
    return _mac(state, f"token:{step}:{attempt}")


def key(state: LoopState, step: str, attempt: int) -> str:
    """The dedupe key of the orchestrator's `step` message of an attempt (stable across
    redeliveries and replicas: it depends on the stored state only)."""
    return f"{state.request.request_id}:{step}:{attempt}:{_mac(state, f'key:{step}:{attempt}')}"


def _carries(given: str | None, expected: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


def refuse_result(state: LoopState, result: WorkerResult) -> str | None:
    """Why `result` is not the answer of the worker dispatched for its attempt; None if it is."""
    if state.decision is not None and result.worker_type != state.decision.worker_type:
        return (
            f"claims the {result.worker_type} worker; attempt {result.attempt} went to "
            f"{state.decision.worker_type}"
        )
    if not _carries(result.dispatch_token, token(state, "task", result.attempt)):
        return f"does not carry the token of attempt {result.attempt}'s task"
    return None


def refuse_verdict(state: LoopState, event: VerdictIssued) -> str | None:
    """Why `event` is not the verdict the orchestrator asked for; None if it is."""
    if not _carries(event.dispatch_token, token(state, "evaluate", event.attempt)):
        return f"does not carry the token of attempt {event.attempt}'s evaluation request"
    return None


A = TypeVar("A", WorkerResult, VerdictIssued)


def checked(
    state: LoopState,
    answer: A,
    refuse: Callable[[LoopState, A], str | None],
    fold: Callable[[LoopState, A], LoopState],
    refused: list[str],
) -> LoopState:
    """`fold(state, answer)`, unless `answer` is not the one asked for (forged, or for another
    dispatch): then the state is left as it is and one line says why, never the content."""
    refused.clear()  # an update may fold more than once (a lost compare-and-set)
    why = refuse(state, answer)
    if why is None:
        return fold(state, answer)
    refused.append(why)
    log.warning(
        "refused a %s for request %s attempt %d: %s",
        answer.kind,
        answer.request_id,
        answer.attempt,
        why,
    )
    return state
