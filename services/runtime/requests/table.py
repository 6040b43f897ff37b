"""A request's life as one table: its states, the legal moves between them and who may make
each, the status word clients see in each state, and the table drawn as the diagram in
`docs/architecture.md` (`python -m services.runtime.requests.lifecycle` redraws it; a test fails
when it drifts). `lifecycle.py` moves records by it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from contracts import RequestState, WorkflowStatus

Actor = Literal["gateway", "frontline", "orchestrator"]
ACTORS: tuple[Actor, ...] = get_args(Actor)
STATES: tuple[RequestState, ...] = get_args(RequestState)

ORCH: tuple[Actor, ...] = ("orchestrator",)
FRONT: tuple[Actor, ...] = ("frontline",)
EITHER: tuple[Actor, ...] = ("frontline", "orchestrator")
ANY: tuple[Actor, ...] = ("gateway", "frontline", "orchestrator")


@dataclass(frozen=True)
class Move:
    """One legal move: from `source` (None: the record is created) to `target`, by `by`."""

    source: RequestState | None
    target: RequestState
    by: tuple[Actor, ...]
    why: str


TABLE: tuple[Move, ...] = (
    Move(None, "accepted", ("gateway",), "a client's message is accepted; its session is free"),
    Move(None, "queued", ("gateway",), "accepted while its session answers another request"),
    Move("queued", "accepted", ANY, "the request before it ended: its turn (whoever ended that)"),
    Move("queued", "cancelled", ORCH, "cancelled, or interrupted, while waiting its turn"),
    Move(
        "accepted",
        "direct",
        FRONT,
        "small talk: answered directly, streaming (passed through in the write of its end)",
    ),
    Move("accepted", "routed", ORCH, "the frontline routed it; the orchestrator took it"),
    Move("accepted", "failed", EITHER, "the frontline's model failed, or delivery ran out"),
    Move("accepted", "cancelled", EITHER, "cancelled before it was answered or routed"),
    Move("direct", "completed", FRONT, "the direct answer is complete"),
    Move("direct", "failed", FRONT, "the model failed while answering"),
    Move("direct", "cancelled", EITHER, "cancelled while streaming"),
    Move("direct", "routed", ORCH, "the frontline's model began answering, then routed it"),
    Move("routed", "decided", ORCH, "the orchestrator chose a worker and criteria"),
    Move("routed", "working", ORCH, "decided, and attempt 1 dispatched in the same write"),
    Move("routed", "evaluating", ORCH, "a replay: a recorded attempt's output judged anew"),
    Move("routed", "completed", ORCH, "answered from the semantic cache"),
    Move("routed", "failed", ORCH, "refused, no such worker, or the model failed"),
    Move("routed", "cancelled", ORCH, "cancelled while deciding"),
    Move("decided", "working", ORCH, "attempt n dispatched to the worker"),
    Move("decided", "awaiting_clarification", ("gateway",), "the answer could not be passed on"),
    Move("decided", "failed", ORCH, "delivery ran out"),
    Move("decided", "cancelled", ORCH, "cancelled before the attempt"),
    Move("working", "working", ("orchestrator", "gateway"), "next attempt, or a worker's step"),
    Move("working", "evaluating", ORCH, "attempt n done; the evaluator judges it"),
    Move("working", "completed", ORCH, "done without judging (no evaluator, or an email sent)"),
    Move("working", "partial", ORCH, "the worker failed; an earlier output is the best"),
    Move("working", "awaiting_clarification", ORCH, "the worker (planner) asks the user"),
    Move("working", "awaiting_approval", ORCH, "the worker asks a person to approve an action"),
    Move("working", "failed", ORCH, "the worker could not do it"),
    Move("working", "cancelled", ORCH, "cancelled during the attempt"),
    Move("evaluating", "working", ORCH, "failed the criteria: retry with the feedback"),
    Move("evaluating", "completed", ORCH, "passed the criteria"),
    Move("evaluating", "partial", ORCH, "out of attempts, or no verdict could be had"),
    Move("evaluating", "awaiting_clarification", ORCH, "the evaluator asks the user"),
    Move("evaluating", "failed", ORCH, "delivery ran out"),
    Move("evaluating", "cancelled", ORCH, "cancelled during the evaluation"),
    Move("awaiting_clarification", "decided", ("gateway",), "the user's answer is accepted"),
    Move("awaiting_clarification", "failed", ORCH, "no answer in time"),
    Move("awaiting_clarification", "cancelled", ORCH, "cancelled while waiting"),
    Move(
        "awaiting_approval",
        "decided",
        ("gateway",),
        "a person approved or declined the action, or answered after it expired (declined)",
    ),
    Move(
        "awaiting_approval",
        "working",
        ORCH,
        "expired (declined), or a decision the gateway recorded but never passed on",
    ),
    Move("awaiting_approval", "failed", ORCH, "delivery ran out"),
    Move("awaiting_approval", "cancelled", ORCH, "cancelled while waiting"),
    Move("decided", "awaiting_approval", ("gateway",), "the decision could not be passed on"),
)

LEGAL: dict[tuple[RequestState | None, RequestState], frozenset[Actor]] = {
    (m.source, m.target): frozenset(m.by) for m in TABLE
}

# The workflow seed's status word a client sees in each state. Inside `working`, a worker may
# show its own pipeline step (researching, synthesizing, validating).
STATUS: dict[RequestState, WorkflowStatus] = {
    "queued": "queued",
    "accepted": "started",
    "direct": "started",
    "routed": "planning",
    "decided": "planning",
    "working": "researching",
    "evaluating": "validating",
    "awaiting_clarification": "awaiting_clarification",
    # The seed's clients know one waiting word; its feedback takes the approval word.
    "awaiting_approval": "awaiting_clarification",
    "completed": "completed",
    "partial": "partial",
    "failed": "failed",
    "cancelled": "cancelled",
}


PARKED: frozenset[RequestState] = frozenset({"awaiting_clarification", "awaiting_approval"})
"""The states in which a request waits for the user's answer."""


def allowed(source: RequestState | None, target: RequestState, by: Actor) -> bool:
    return by in LEGAL.get((source, target), frozenset())


def reachable(
    source: RequestState | None,
    target: RequestState,
    by: Actor,
    via: tuple[RequestState, ...] = (),
) -> bool:
    """Whether `by` may move a request from `source` to `target`: in one move, or through the
    states `via`, each move of the way legal (several moves written as one: the frontline's
    direct answer goes accepted -> direct -> completed in the one write that ends it)."""
    if allowed(source, target, by):
        return True
    if not via:
        return False
    state = source
    for step in via:
        if not allowed(state, step, by):
            return False
        state = step
    return allowed(state, target, by)


# --- the diagram in docs/architecture.md ---------------------------------------------------

DOC = "docs/architecture.md"
BEGIN = "<!-- lifecycle diagram: generated by `python -m services.runtime.requests.lifecycle` -->"
END = "<!-- end of lifecycle diagram -->"


def mermaid() -> str:
    """The table as a Mermaid state diagram (one arrow per move, labelled with who makes it),
    followed by the same moves as a table that says why each happens."""
    lines = ["```mermaid", "stateDiagram-v2"]
    for m in TABLE:
        source = "[*]" if m.source is None else m.source
        lines.append(f"    {source} --> {m.target}: {', '.join(m.by)}")
    for state in ("completed", "partial", "failed", "cancelled"):
        lines.append(f"    {state} --> [*]")
    lines += ["```", "", "| from | to | by | when |", "|---|---|---|---|"]
    for m in TABLE:
        origin = "(new)" if m.source is None else f"`{m.source}`"
        lines.append(f"| {origin} | `{m.target}` | {', '.join(m.by)} | {m.why} |")
    lines += ["", "| state | status word clients see |", "|---|---|"]
    lines += [f"| `{state}` | `{STATUS[state]}` |" for state in STATES]
    return "\n".join(lines)


def rendered(doc: str) -> str:
    """`doc` with the diagram between its markers replaced by the current one."""
    head, marker, rest = doc.partition(BEGIN)
    if not marker or END not in rest:
        raise ValueError(f"{DOC} lacks the lifecycle diagram markers")
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n{mermaid()}\n{END}{tail}"
