"""What the attempt loop knows about one request: the attempts so far, the decision, the
verdicts, the open questions. Folded by `loop.py`, projected into messages by `projection.py`."""

from __future__ import annotations

import secrets
from typing import Literal

from pydantic import Field

from contracts import (
    Model,
    OrchestratorDecision,
    Question,
    RequestFailed,
    RequestRouted,
    Usage,
    Verdict,
    WorkerResult,
)
from contracts.approvals import Approval
from contracts.frontend import LoopMessage, ToolCall
from contracts.state import TerminalState

Status = Literal[
    "deciding",
    "working",
    "evaluating",
    "awaiting_clarification",
    "awaiting_approval",
    TerminalState,
]
MAX_CLARIFICATION_ROUNDS = 2
# How many times one request may stop for its client's own tools (AG-UI frontend tools).
MAX_TOOL_ROUNDS = 10
# Kinds whose success is a side effect in the world (a sent email): judging it afterwards could
# only lead to a second send, so a successful result ends the request.
SIDE_EFFECT_WORKERS = frozenset({"EMAIL"})


class Attempt(Model):
    n: int = Field(ge=1, description="Attempt number.")
    result: WorkerResult | None = Field(default=None, description="The worker's result.")
    verdict: Verdict | None = Field(default=None, description="The evaluator's verdict.")
    verdict_error: str | None = Field(default=None, description="Why no verdict could be had.")
    span_id: str | None = Field(default=None, description="Trace span id of the attempt (hex).")
    started_ns: int | None = Field(default=None, description="When it was dispatched (ns).")
    approval_id: str | None = Field(
        default=None, description="The decided approval this attempt's worker acts on."
    )


class LoopState(Model):
    """Everything the attempt loop knows about one request; lives in the orchestrator's own
    `requests` bucket (the request's record, which every service reads, is separate)."""

    request: RequestRouted = Field(description="The routed request.")
    max_attempts: int = Field(ge=1, description="Attempt budget.")
    status: Status = Field(default="deciding", description="Where the loop is.")
    decision: OrchestratorDecision | None = Field(default=None, description="The decision.")
    attempts: list[Attempt] = Field(default_factory=list, description="Attempts so far.")
    failure: RequestFailed | None = Field(default=None, description="Set when it failed.")
    usage: Usage = Field(default_factory=Usage, description="Model usage so far.")
    questions: list[Question] = Field(default_factory=list, description="Open questions.")
    clarifications: list[str] = Field(
        default_factory=list, description="Answered questions ('Q: ... A: ...')."
    )
    answers: list[str] = Field(
        default_factory=list,
        description="The user's own words in those answers, without the questions.",
    )
    rounds: int = Field(default=0, ge=0, description="Clarification rounds so far.")
    approval: Approval | None = Field(default=None, description="The approval waited for.")
    approvals: list[Approval] = Field(
        default_factory=list, description="Approvals decided so far, with their decisions."
    )
    waiting_tools: list[ToolCall] = Field(
        default_factory=list,
        description="The client's tool calls it is parked on (AG-UI frontend tools).",
    )
    transcript: list[LoopMessage] = Field(
        default_factory=list,
        description="The TOOLS conversation carried to the next attempt: up to the client's "
        "tool calls, and their results once they came.",
    )
    tool_rounds: int = Field(default=0, ge=0, description="Client tool rounds so far.")
    cancel_reason: str | None = Field(default=None, description="Why it was cancelled.")
    budget_note: str | None = Field(
        default=None, description="Set when a budget stopped it: which limit, and the spend."
    )
    trace_id: str | None = Field(default=None, description="Trace id of the request (hex).")
    span_id: str | None = Field(default=None, description="Span the attempts hang under (hex).")
    secret: str = Field(
        default_factory=lambda: secrets.token_hex(16),
        description="Never sent: the root of this request's dispatch tokens and dedupe keys "
        "(authentic.py).",
    )

    @property
    def current(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None
