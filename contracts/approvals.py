"""Approvals on the wire: one consequential action (an email to send, a notification to push,
a tool to run) that a person must allow before a worker does it. A worker asks (`ApprovalAsk`
in its result), the orchestrator parks the request with an `Approval` (kept in the `approvals`
bucket, key: its id), the gateway records the person's decision on it by compare-and-set, and
the worker then runs exactly the arguments whose digest was approved, at most once."""

from __future__ import annotations

import hashlib
import json
from typing import Literal

from pydantic import AwareDatetime, Field

from contracts.base import Model, utcnow

PolicyDecision = Literal["allow", "ask", "deny"]
Approver = Literal["principal", "operator"]
ApprovalState = Literal["pending", "approved", "denied", "expired"]


def digest_of(action: str, arguments: dict[str, str]) -> str:
    """The digest an approval is bound to: the action and its arguments, canonical JSON."""
    canonical = json.dumps({"action": action, "arguments": arguments}, sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


class ApprovalAsk(Model):
    """A worker's request for approval of one action, exactly as it would run."""

    action: str = Field(description="The action, e.g. 'email.send'.")
    arguments: dict[str, str] = Field(description="Its arguments, exactly as they will run.")
    digest: str = Field(description="sha256 of the action and arguments (canonical JSON).")
    reason: str = Field(description="Why the policy asks (shown to the person).")
    approver: Approver = Field(
        default="principal",
        description="Who may decide: 'principal' (the request's principal, or an operator "
        "named in SIDEKICK_APPROVERS) or 'operator' (only those operators).",
    )


class ApprovalDecision(Model):
    """One decision on an approval, kept with it."""

    decision: Literal["approved", "denied", "expired"] = Field(description="What was decided.")
    by: str = Field(description="Who decided: the principal, or 'sidekick' for an expiry.")
    at: AwareDatetime = Field(default_factory=utcnow, description="When.")
    digest: str = Field(description="The digest of the arguments decided on.")


class Approval(Model):
    """A parked action awaiting (or past) a person's decision."""

    approval_id: str = Field(description="Its id (answers name it; a stale id is refused).")
    request_id: str = Field(description="The request that asked.")
    attempt: int = Field(ge=1, description="The attempt whose worker asked.")
    approvers: list[str] = Field(description="Principals who may decide.")
    approver: Approver = Field(
        default="principal",
        description="The role that may decide: the request's principal (and operators), or "
        "operators only.",
    )
    action: str = Field(description="The action, e.g. 'email.send'.")
    arguments: dict[str, str] = Field(description="Its arguments, exactly as they will run.")
    digest: str = Field(description="sha256 of the action and arguments (canonical JSON).")
    reason: str = Field(description="Why the policy asks.")
    created_at: AwareDatetime = Field(default_factory=utcnow, description="When it was asked.")
    expires_at: AwareDatetime = Field(description="After this it counts as declined.")
    state: ApprovalState = Field(default="pending", description="Where it stands.")
    decisions: list[ApprovalDecision] = Field(
        default_factory=list, description="Every decision, first one standing."
    )
