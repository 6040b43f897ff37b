"""EMAIL: to/subject/body from the task's parameters (the model drafts the body from the
notes), sent with SendGrid, or, with no key, kept in the local outbox marked NOT SENT.

At most once per (request, attempt): the send is claimed in the idempotency ledger first and its
outcome recorded after, so a task delivered twice sends once. This worker fetches nothing.

A real send first asks the operator's approval policy (services/runtime/approvals/policy.py).
When it asks, the worker returns the email exactly as it would send it (with its digest) and
sends nothing; the attempt after a person's decision sends only a draft whose digest is the
approved one, claimed in the ledger under the approval's id (once per approval), or reports the
decline.
"""

from __future__ import annotations

import asyncio
import re
import urllib.error

import sendgrid
from python_http_client.exceptions import HTTPError
from sendgrid.helpers.mail import Mail

from contracts import Usage, WorkerResult, WorkerTask
from contracts.approvals import Approval, ApprovalAsk, digest_of
from contracts.email import EmailDraft, OutboxEntry
from services.runtime.approvals.policy import Policy, Ruling
from services.runtime.approvals.records import Approvals
from services.runtime.base.errors import MODEL_ERRORS, BudgetSpent
from services.runtime.budgets.guard import guard, refused
from services.runtime.llm.prompts import conversation
from services.runtime.requests import outbox
from services.runtime.requests.replays import is_replay, would_have
from services.workers.base import WorkerDeps, result_for, task_prompt
from services.workers.errors import (
    EmailError,
    EmailNotConfigured,
    EmailOutcomeUnknown,
    EmailSendFailed,
    InvalidRecipient,
)
from services.workers.ledger import Effect, Ledger, effect_key
from services.workers.settings import WorkerSettings

SYSTEM = """You are Sidekick's email writer. Draft the email the task asks for: a short subject \
line and a plain-text body with a greeting and a sign-off. Say what the notes say, in the tone \
they ask for; do not invent facts, and use no placeholders such as [Your Name]. If the notes \
give a subject, use it."""

MAX_RECIPIENTS = 10
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_ADDRESS = re.compile(rf"^[A-Za-z0-9.!#$%&'*+/=?^_`{{|}}~-]+@{_LABEL}(?:\.{_LABEL})+$")
_FIND = re.compile(r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")
TO_KEYS = ("to", "recipient", "recipients", "to_email", "email")
BODY_KEYS = ("body", "body_notes", "notes", "content", "text", "message")


def _param(task: WorkerTask, keys: tuple[str, ...]) -> str:
    # Models spell names loosely ("Body notes", "to-email"); compare a normal form.
    lowered = {re.sub(r"[\s-]+", "_", k.strip().lower()): v for k, v in task.parameters.items()}
    for key in keys:
        value = lowered.get(key, "").strip()
        if value:
            return value
    return ""


def recipients_of(task: WorkerTask, allowed: frozenset[str]) -> list[str]:
    """Validated recipient addresses; raises InvalidRecipient with a reason a user can act on."""
    raw = _param(task, TO_KEYS)
    if raw:
        parts = [p.strip() for p in re.split(r"[,;]", raw) if p.strip()]
        parts = [p[p.find("<") + 1 : p.rfind(">")] if "<" in p and ">" in p else p for p in parts]
    else:
        found = list(dict.fromkeys(_FIND.findall(f"{task.task_description}\n{task.message}")))
        if len(found) != 1:
            reason = (
                "the task names no recipient address"
                if not found
                else f"the task names several addresses ({', '.join(found)}) and no 'to'"
            )
            raise InvalidRecipient("", reason + "; say who the email is for.")
        parts = found
    if not parts:
        raise InvalidRecipient(raw, "no address given")
    if len(parts) > MAX_RECIPIENTS:
        raise InvalidRecipient(raw, f"at most {MAX_RECIPIENTS} recipients per email")
    out = []
    for address in parts:
        if not _ADDRESS.match(address):
            raise InvalidRecipient(address, "not a valid email address")
        domain = address.rsplit("@", 1)[1].lower()
        if allowed and domain not in allowed:
            raise InvalidRecipient(
                address,
                f"the domain {domain} is not allowed (SIDEKICK_EMAIL_ALLOWED_DOMAINS: "
                f"{', '.join(sorted(allowed))})",
            )
        out.append(address)
    return list(dict.fromkeys(out))


def draft_text(task: WorkerTask, recipients: list[str], approved: Approval | None = None) -> str:
    subject = _param(task, ("subject", "title"))
    notes = _param(task, BODY_KEYS)
    facts = (
        f"Recipients: {', '.join(recipients)}"
        + (f"\nSubject: {subject}" if subject else "")
        + (f"\nNotes for the body: {notes}" if notes else "")
    )
    if approved is not None:  # only these exact words may be sent
        facts += (
            "\n\nThe user approved exactly this email; return it unchanged.\n"
            f"Subject: {approved.arguments.get('subject', '')}\n"
            f"Body:\n{approved.arguments.get('body', '')}"
        )
    return task_prompt(task, facts)


def written_by_user(task: WorkerTask) -> str:
    """Everything the user wrote in the conversation: the message, the user's turns and the
    user's answers to questions. Never what a model wrote: not the questions a model asked
    (`task.clarifications` holds them beside the answers), not the assistant's turns, not the
    task a model described."""
    turns = [t.content for t in task.history if t.role == "user"]
    return "\n".join([task.message, *turns, *task.answers])


def declined_text(approval: Approval) -> str:
    args = approval.arguments
    what = f'to {args.get("to", "")}, subject "{args.get("subject", "")}"'
    last = approval.decisions[-1] if approval.decisions else None
    if approval.state == "expired":
        return (
            f"The email ({what}) was not sent: no one approved it before the approval expired"
            + (f" at {last.at.isoformat(timespec='seconds')}" if last else "")
            + ", so it counts as declined."
        )
    return f"The user declined to send this email ({what}); it was not sent."


class EmailWorker:
    kind = "EMAIL"

    def __init__(self, deps: WorkerDeps, settings: WorkerSettings | None = None) -> None:
        self.bus = deps.bus
        self.llm = deps.llm
        self.settings = settings or WorkerSettings()
        self.policy = Policy.configured(
            self.settings.approvals, self.settings.approval_policy, deps.bus.settings.operators
        )
        self.sendgrid: sendgrid.SendGridAPIClient | None = None
        if self.settings.sendgrid_configured:
            self.sendgrid = sendgrid.SendGridAPIClient(
                api_key=self.settings.sendgrid_api_key, host=self.settings.sendgrid_base_url
            )
            self.sendgrid.client.timeout = self.settings.sendgrid_timeout

    @property
    def ledger(self) -> Ledger:
        return Ledger(self.bus.kv.ledger, stale_after=self.settings.sendgrid_timeout + 15)

    async def run(self, task: WorkerTask) -> WorkerResult:
        try:
            recipients = recipients_of(task, self.settings.allowed_domains)
            if self.sendgrid is not None and not self.settings.sendgrid_from_email:
                raise EmailNotConfigured(
                    "SENDGRID_API_KEY is set but SENDGRID_FROM_EMAIL is not: set it to a "
                    "sender address verified in SendGrid."
                )
        except EmailError as exc:
            return result_for(task, success=False, error=str(exc))
        approved = await self.approval_of(task) if self.sendgrid is not None else None
        if approved is not None and approved.state != "approved":
            return result_for(task, success=True, output=declined_text(approved))
        try:
            drafted = await self.llm.structured(
                conversation(SYSTEM, task.history, draft_text(task, recipients, approved)),
                EmailDraft,
                length="answer",
                budget=guard(task.budget, Usage()),  # its repair call is checked too
            )
        except BudgetSpent as exc:
            return refused(task, exc)
        except MODEL_ERRORS as exc:
            return result_for(task, success=False, error=str(exc))
        draft = drafted.value
        subject = _param(task, ("subject", "title")) or draft.subject
        if is_replay(task):  # a replay sends nothing, anywhere: it says what it would have sent
            would = {"to": ", ".join(recipients), "subject": subject, "body": draft.body}
            return result_for(
                task, success=True, output=would_have("email.send", would), usage=drafted.usage
            )
        key = effect_key("email", task.request_id, task.attempt)
        if self.sendgrid is not None:  # a real send: the operator's policy decides first
            arguments = {"to": ", ".join(recipients), "subject": subject, "body": draft.body}
            digest = digest_of("email.send", arguments)
            if approved is not None and approved.digest == digest:
                key = f"email.approved.{approved.approval_id}"
            else:
                ruling = self.policy.email(recipients, written_by_user(task))
                if approved is not None:
                    reason = "the email changed after it was approved"
                    ruling = Ruling("ask", reason, ruling.approver)
                if ruling.decision == "deny":
                    return result_for(
                        task,
                        success=False,
                        error=f"Sidekick may not send this email: {ruling.reason}.",
                        usage=drafted.usage,
                    )
                if ruling.decision == "ask":
                    ask = ApprovalAsk(
                        action="email.send",
                        arguments=arguments,
                        digest=digest,
                        reason=ruling.reason,
                        approver=ruling.approver,
                    )
                    return result_for(task, success=False, approval=ask, usage=drafted.usage)
        prior = await self.ledger.claim(key)
        if prior is not None:
            return self.replay(task, prior)
        try:
            if self.sendgrid is None:
                output = await self.keep_in_outbox(task, recipients, subject, draft.body)
            else:
                output = await self.send(recipients, subject, draft.body)
        except EmailError as exc:
            state = "unknown" if isinstance(exc, EmailOutcomeUnknown) else "failed"
            await self.ledger.record(
                key, Effect(state=state, error=str(exc), retryable=exc.retryable)
            )
            return result_for(
                task, success=False, error=str(exc), retryable=exc.retryable, usage=drafted.usage
            )
        await self.ledger.record(key, Effect(state="succeeded", output=output))
        return result_for(task, success=True, output=output, usage=drafted.usage)

    async def approval_of(self, task: WorkerTask) -> Approval | None:
        """The decided approval the task names (of this request), or None. As it counts: an
        approval whose decision the server stored after its expiry is expired, not sent."""
        if task.approval_id is None:
            return None
        found = await Approvals(self.bus.kv.approvals).counted(task.approval_id)
        if found is None or found.request_id != task.request_id:
            return None
        return found

    def replay(self, task: WorkerTask, prior: Effect) -> WorkerResult:
        """A repeated delivery: report what happened the first time, do not act again."""
        if prior.state == "succeeded":
            return result_for(task, success=True, output=prior.output)
        if prior.state == "failed":
            return result_for(task, success=False, error=prior.error, retryable=prior.retryable)
        return result_for(
            task,
            success=False,
            error="This email may or may not have been sent: an earlier delivery of the same "
            "task stopped mid-send. It is not sent again, to avoid a duplicate"
            + (f" ({prior.error})." if prior.error else "."),
        )

    async def send(self, recipients: list[str], subject: str, body: str) -> str:
        assert self.sendgrid is not None
        mail = Mail(
            from_email=self.settings.sendgrid_from_email,
            to_emails=recipients,
            subject=subject,
            plain_text_content=body,
        )
        client = self.sendgrid
        try:
            resp = await asyncio.to_thread(client.send, mail)
        except HTTPError as exc:
            status = int(getattr(exc, "status_code", 0) or 0)
            detail = _detail(getattr(exc, "body", b""))
            raise EmailSendFailed(
                f"SendGrid refused the email (HTTP {status}): {detail}",
                retryable=status == 429 or status >= 500,
            ) from exc
        except TimeoutError as exc:
            raise EmailOutcomeUnknown(
                f"SendGrid did not answer within {self.settings.sendgrid_timeout:g}s; the email "
                "may or may not have been sent, so it is not retried."
            ) from exc
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise EmailOutcomeUnknown(
                    "SendGrid timed out; the email may or may not have been sent, so it is not "
                    "retried."
                ) from exc
            raise EmailSendFailed(
                f"SendGrid could not be reached: {exc.reason}", retryable=True
            ) from exc
        status = int(getattr(resp, "status_code", 0) or 0)
        if status >= 300:
            raise EmailSendFailed(f"SendGrid answered HTTP {status}; the email was not accepted.")
        headers = getattr(resp, "headers", None)
        message_id = headers.get("X-Message-Id") if headers is not None else None
        receipt = f" (message id {message_id})" if message_id else ""
        return (
            f"Email sent to {', '.join(recipients)} via SendGrid{receipt}.\n\n"
            f"Subject: {subject}\n\n{body}"
        )

    async def keep_in_outbox(
        self, task: WorkerTask, recipients: list[str], subject: str, body: str
    ) -> str:
        entry = OutboxEntry(
            request_id=task.request_id,
            session_id=task.session_id,
            attempt=task.attempt,
            to=recipients,
            from_email=self.settings.sendgrid_from_email,
            subject=subject,
            body=body,
        )
        try:
            await outbox.put(self.bus.js, self.bus.subjects, entry)
        except Exception as exc:  # the bus failed: nothing was kept, a new attempt may work
            raise EmailSendFailed(
                f"The email could not be kept in the outbox: {exc!r}", retryable=True
            ) from exc
        return (
            "Email NOT SENT: no SENDGRID_API_KEY is set, so it was kept in the local outbox "
            "(see `sidekick outbox` or GET /api/outbox). Set SENDGRID_API_KEY and "
            "SENDGRID_FROM_EMAIL to send mail.\n\n"
            f"To: {', '.join(recipients)}\nSubject: {subject}\n\n{body}"
        )


def _detail(body: object) -> str:
    text = body.decode(errors="replace") if isinstance(body, bytes) else str(body or "")
    return text[:300] or "no detail"
