"""The local outbox: mail the EMAIL worker could not send (no SendGrid key), kept on the
JetStream stream `<NAMESPACE>_OUTBOX` under `<ns>.outbox.<request_id>`, marked NOT SENT.
The workers write it; `sidekick outbox` and the gateway's `GET /api/outbox` read it."""

from __future__ import annotations

import nats.js.errors
from nats.js import JetStreamContext
from nats.js.api import RetentionPolicy, StorageType, StreamConfig
from pydantic import ValidationError

from contracts import Subjects
from contracts.email import OutboxEntry
from services.runtime.bus import DAY, ensure_stream, msg_id


async def ensure_outbox(js: JetStreamContext, subjects: Subjects) -> None:
    await ensure_stream(
        js,
        StreamConfig(
            name=subjects.outbox_stream,
            subjects=[subjects.outbox_all],
            retention=RetentionPolicy.LIMITS,
            storage=StorageType.FILE,
            max_age=30 * DAY,
            duplicate_window=10 * 60,
        ),
    )


async def put(js: JetStreamContext, subjects: Subjects, entry: OutboxEntry) -> None:
    """Keep one entry; the same (request, attempt) is stored once."""
    await ensure_outbox(js, subjects)
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
