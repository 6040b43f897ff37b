"""An approval in words, as the surfaces show it, and the words a person answers with.

The question (`approval_question`) is the action exactly as it would run, and who decides it;
every text surface shows it (the WebSocket's legacy frames, `sidekick chat`, /v1, A2A's and
AG-UI's text). Text surfaces take `yes` or `no` and their usual spellings as the answer
(`verdict_of`); the workflows API takes the seed's approval words too, which are among them. A
decided approval goes into the session's history as its question (`approval_text`) and the
person's answer (`said`)."""

from __future__ import annotations

import re

from contracts.approvals import Approval
from services.runtime.approvals.errors import UnclearAnswer
from services.runtime.approvals.records import Verdict

YES = frozenset({"yes", "y", "approve", "approved", "ok", "okay", "send", "send it", "true"})
NO = frozenset(
    {
        "no",
        "n",
        "deny",
        "denied",
        "decline",
        "declined",
        "reject",
        "rejected",
        "needs_changes",
        "needs changes",
        "don't",
        "dont",
        "do not send",
        "false",
    }
)
HOW = "This request waits for your approval: answer yes to approve it, or no to decline."


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


def verdict_of(text: str) -> Verdict:
    """The decision a person's words say; UnclearAnswer when they say neither."""
    said = re.sub(r"[\s.!]+$", "", text.strip().lower())
    if said in YES:
        return "approved"
    if said in NO:
        return "denied"
    raise UnclearAnswer(HOW)


def approval_text(approval: Approval) -> str:
    """A decided approval's question, as the session's history keeps it."""
    return f"May Sidekick do {approval.action}? ({approval.reason})"


def said(verdict: Verdict) -> str:
    """A person's decision, as the session's history keeps it."""
    return "Yes, approved." if verdict == "approved" else "No, declined."


def said_late(verdict: Verdict) -> str:
    """A person's decision that came after the approval expired, as the history keeps it."""
    return f"{said(verdict)} (Too late: the approval had expired, so it counts as declined.)"
