"""The local outbox: mail the EMAIL worker could not send (no SendGrid key), kept on the
JetStream stream `<NAMESPACE>_OUTBOX` under `<ns>.outbox.<request_id>`, marked NOT SENT.
The workers write it; `sidekick outbox` and the gateway's `GET /api/outbox` read it: this module is
all of it (storing, reading, who may see an entry, and how it reads as text)."""

from __future__ import annotations

import nats.js.errors
from nats.js import JetStreamContext
from pydantic import ValidationError

from contracts import Subjects
from contracts.email import OutboxEntry
from services.runtime.bus.core import msg_id

SEND_HINT = "set SENDGRID_API_KEY and SENDGRID_FROM_EMAIL to send mail."


async def put(js: JetStreamContext, subjects: Subjects, entry: OutboxEntry) -> None:
    """Keep one entry; the same (request, attempt) is stored once. (The stream is made by the
    bootstrap step, services/runtime/bus/topology.py.)"""
    await js.publish(
        subjects.outbox(entry.request_id),
        entry.model_dump_json().encode(),
        stream=subjects.outbox_stream,
        headers={"Nats-Msg-Id": msg_id(entry.request_id, "outbox", entry.attempt)},
        timeout=10,
    )


async def read(js: JetStreamContext, subjects: Subjects, limit: int = 50) -> list[OutboxEntry]:
    """The newest `limit` entries, newest first; empty when nothing was ever kept."""
    try:
        info = await js.stream_info(subjects.outbox_stream)
    except nats.js.errors.NotFoundError:
        return []
    entries: list[OutboxEntry] = []
    seq = info.state.last_seq
    while seq >= max(info.state.first_seq, 1) and len(entries) < limit:
        try:
            msg = await js.get_msg(subjects.outbox_stream, seq)
        except nats.js.errors.NotFoundError:  # removed by age or by hand
            seq -= 1
            continue
        seq -= 1
        try:
            entries.append(OutboxEntry.model_validate_json(msg.data or b""))
        except ValidationError:
            continue  # not ours to show
    return entries


def visible_to(
    entries: list[OutboxEntry], principal: str, session: str | None = None
) -> list[OutboxEntry]:
    """The entries of the principal's sessions (of one of its client uuids, if given)."""
    mine = f"{principal}/"
    if session:
        return [e for e in entries if e.session_id == mine + session]
    return [e for e in entries if e.session_id.startswith(mine)]


def render(entries: list[OutboxEntry]) -> str:
    if not entries:
        return "The outbox is empty."
    blocks = []
    for e in entries:
        body = "\n".join(f"    {line}" for line in e.body.splitlines())
        blocks.append(
            f"NOT SENT  {e.created_at:%Y-%m-%d %H:%M:%S %Z}  request {e.request_id}\n"
            f"  To: {', '.join(e.to)}\n"
            f"  Subject: {e.subject}\n{body}"
        )
    return "\n\n".join(blocks) + f"\n\nThese were NOT sent: {SEND_HINT}"
