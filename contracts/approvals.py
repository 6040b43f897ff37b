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


def approval_question(approval: Approval) -> str:
    """The approval as one question in words (every text surface shows this)."""
    args = approval.arguments
    if approval.action == "email.send":
        what = (
            "Sidekick is about to send this email:\n"
            f"To: {args.get('to', '')}\nSubject: {args.get('subject', '')}\n\n"
            f"{args.get('body', '')}"
        )
    elif approval.action == "notify":
        title = f"Title: {args['title']}\n" if "title" in args else ""
        what = (
            "Sidekick is about to send you this push notification:\n"
            f"{title}\n{args.get('message', '')}"
        )
    elif approval.action == "python_run":
        what = (
            "Sidekick is about to run this Python program in its sandbox:\n\n"
            f"{args.get('code', '')}"
        )
    elif approval.action == "browser.new_domain":
        what = f"Sidekick's browser is about to open a page on {args.get('domain', '')}."
    else:  # an MCP server's tool, `<server>__<tool>`, or an action yet to come
        shown = "\n".join(f"{k}: {_indented(v)}" for k, v in sorted(args.items()))
        what = f"Sidekick is about to run {approval.action} with:\n{shown or '(no arguments)'}"
    if approval.approver == "operator":
        return (
            f"{what}\n\n({approval.reason}.) An operator must approve it "
            f"(approval {approval.approval_id}); this request waits for their decision."
        )
    return f"{what}\n\n({approval.reason}.) Reply yes to approve it, or no to decline."


def _indented(value: str) -> str:
    """A value's later lines indented, so an argument cannot pass for the next one."""
    return value.replace("\n", "\n    ")
