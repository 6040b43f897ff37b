"""A flood of poison messages cannot flood the log: each refusal is one line naming the subject,
the size and the request, never the content, and repeats are summarised."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
from nats.aio.client import Client as NATS

from contracts import Subjects
from tests.support.harness import System
from tests.support.systems import Systems

FLOOD = 25
MARKER = "POISONCONTENT"


@pytest.fixture(scope="module")
def poisoned(systems: Systems) -> Iterator[System]:
    yield from systems.run()


async def test_a_flood_of_poison_messages_is_one_line_each_kind_without_their_content(
    poisoned: System, nc: NATS
) -> None:
    js = nc.jetstream()
    s = Subjects(poisoned.namespace)
    log = poisoned.log_path("frontline")
    size_before = log.stat().st_size
    before = (await js.stream_info(s.deadletter_stream)).state.last_seq
    body = {"kind": "chat.requested", "request_id": "poison-r1", "junk": MARKER * 30_000}
    data = json.dumps(body).encode()
    for i in range(FLOOD):
        await js.publish(s.chat_requested, data, headers={"Nats-Msg-Id": f"poison-flood-{i}"})
    for _ in range(600):  # every one of them dead-lettered, whole
        if (await js.stream_info(s.deadletter_stream)).state.last_seq >= before + FLOOD:
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the poison messages did not reach the dead-letter stream")
    summary = "poison messages refused in the last"
    for _ in range(300):  # the interval's summary line
        if summary in log.read_text(errors="replace")[size_before:]:
            break
        await asyncio.sleep(0.1)
    text = log.read_bytes()[size_before:].decode(errors="replace")
    assert MARKER not in text
    assert len(text) < 4096, f"the log grew {len(text)} bytes for {FLOOD} poison messages"
    lines = [line for line in text.splitlines() if "poison" in line]
    assert len(lines) == 2, lines
    assert (
        f"refused a poison message on {s.chat_requested} ({len(data)} bytes, request poison-r1)"
        in lines[0]
    )
    assert f"{FLOOD - 1} more on {s.chat_requested}" in lines[1]
