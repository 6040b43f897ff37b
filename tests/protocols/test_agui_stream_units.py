"""AG-UI streams, piece by piece without a broker: each event's id on the wire and in its
metadata, the framing of a re-attached stream at every possible cut (valid for a fresh client,
nothing missed, nothing twice), a request parked on the client's tools ending its run with the
calls, and an approval interrupt's expiry."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from ag_ui.core import EventType

from contracts import (
    ClarificationRequested,
    Progress,
    Question,
    RequestCompleted,
    StreamChunk,
    ToolUse,
)
from contracts.approvals import Approval
from contracts.frontend import (
    ToolCall,
)
from services.gateway.agui.stream import Cut
from services.gateway.agui.translate import Run, Translator

pytestmark = pytest.mark.fast

RUN = Run("t1", "run-1", "r1", 0)


def stored() -> list[Any]:
    """A routed request with a step, a tool call, streamed text and its end, as stored."""
    ids = {"request_id": "r1", "session_id": "s1"}
    use = ToolUse(call_id="c1", name="files_list", arguments="{}", result="[]", ok=True, attempt=1)
    return [
        Progress(**ids, stage="routed", detail="tools"),
        Progress(**ids, stage="attempt_started", attempt=1),
        Progress(**ids, stage="worker_step", attempt=1, tool=use),
        StreamChunk(**ids, seq=0, text="Hello "),
        StreamChunk(**ids, seq=1, text="there."),
        Progress(**ids, stage="attempt_finished", attempt=1),
        Progress(**ids, stage="evaluated", attempt=1, passed=True, score=90, feedback="ok"),
        RequestCompleted(**ids, status="completed", output="Hello there.", route="orchestrated"),
    ]


STORED = stored()


def stream(position: tuple[int, int] | None) -> list[tuple[str | None, dict[str, Any]]]:
    """The events one response sends, as (SSE id, data), the stored events at seq 10, 11..."""
    translator = Translator(RUN)
    opening = translator.opening()
    cut = Cut(position, opening[0], (0, 0))
    chunks = cut.opening()
    for k, event in enumerate(opening):
        chunks += cut.take(event, 0, k)
    for seq, event in enumerate(STORED, start=10):
        for k, out in enumerate(translator.take(event)):
            chunks += cut.take(out, seq, k)
    chunks += cut.closing()
    sent = []
    for chunk in chunks:
        lines = chunk.decode().strip().split("\n")
        sse_id = lines[0].removeprefix("id: ") if lines[0].startswith("id: ") else None
        sent.append((sse_id, json.loads(lines[-1].removeprefix("data: "))))
    return sent


# What opens a step, a message or a tool call, what must come inside one that is open, and
# what closes it: each by the key of the id it names.
OPENS = {
    EventType.STEP_STARTED: "stepName",
    EventType.TEXT_MESSAGE_START: "messageId",
    EventType.TOOL_CALL_START: "toolCallId",
}
INSIDE = {
    EventType.TEXT_MESSAGE_CONTENT: "messageId",
    EventType.TEXT_MESSAGE_END: "messageId",
    EventType.TOOL_CALL_ARGS: "toolCallId",
    EventType.TOOL_CALL_END: "toolCallId",
}
CLOSES = {
    EventType.STEP_FINISHED: "stepName",
    EventType.TEXT_MESSAGE_END: "messageId",
    EventType.TOOL_CALL_END: "toolCallId",
}


def valid_for_a_fresh_client(events: list[dict[str, Any]]) -> None:
    """What @ag-ui/client's verifier demands of a stream, from its first event."""
    assert events[0]["type"] == EventType.RUN_STARTED
    open_now: dict[str, set[str]] = {key: set() for key in OPENS.values()}
    for e in events[1:]:
        kind = e["type"]
        if kind in OPENS:
            open_now[OPENS[kind]].add(e[OPENS[kind]])
        if kind in INSIDE:
            assert e[INSIDE[kind]] in open_now[INSIDE[kind]], e
        if kind in CLOSES:
            # KeyError: finished a step never started
            open_now[CLOSES[kind]].remove(e[CLOSES[kind]])
        if kind == EventType.RUN_FINISHED:
            assert not any(open_now.values()), open_now
    assert events[-1]["type"] == EventType.RUN_FINISHED


def test_every_event_has_its_id_on_the_wire_and_in_its_metadata() -> None:
    whole = stream(None)
    valid_for_a_fresh_client([data for _, data in whole])
    assert all(sse_id is not None for sse_id, _ in whole)
    assert [data["metadata"]["sidekick"]["eventId"] for _, data in whole] == [i for i, _ in whole]


def test_a_stream_re_attached_after_any_event_is_valid_and_misses_and_repeats_nothing() -> None:
    whole = stream(None)
    position = [tuple(int(p) for p in sse_id.split(".")) for sse_id, _ in whole if sse_id]
    reopened: set[str] = set()
    for n, cut in enumerate(position):
        got = stream((cut[0], cut[1]))
        valid_for_a_fresh_client([data for _, data in got])
        framing = [data for sse_id, data in got if sse_id is None]
        rest = [(sse_id, data) for sse_id, data in got if sse_id is not None]
        assert rest == whole[n + 1 :], f"after {cut}"  # every event after the cut, once
        assert framing[0]["type"] == EventType.RUN_STARTED and framing[0]["runId"] == "run-1"
        assert all("metadata" not in f for f in framing)  # framing moves no client's position
        if rest:  # the framing comes first
            assert [sse_id for sse_id, _ in got].index(rest[0][0]) == len(framing)
        reopened |= {f["type"] for f in framing[1:]}
    # Cut inside a step, a text message and a tool call, each was opened again (and after the
    # end, the end was sent again).
    assert reopened == {"STEP_STARTED", "TEXT_MESSAGE_START", "TOOL_CALL_START", "RUN_FINISHED"}


def test_a_client_that_saw_the_end_gets_the_start_and_the_end_again() -> None:
    whole = stream(None)
    last = tuple(int(p) for p in str(whole[-1][0]).split("."))
    got = stream((last[0], last[1]))
    assert [(sse_id, data["type"]) for sse_id, data in got] == [
        (None, EventType.RUN_STARTED),
        (None, EventType.RUN_FINISHED),
    ]


def asking(question: Question, **parked: Any) -> ClarificationRequested:
    """The planner parking request r1 on `question`, with what else it `parked` on."""
    return ClarificationRequested(
        request_id="r1", session_id="s1", questions=[question], source="planner", **parked
    )


def test_a_request_parked_on_client_tools_ends_the_run_with_the_calls_and_no_result() -> None:
    translator = Translator(RUN)
    calls = [ToolCall(call_id="k1", name="confirm_booking", arguments='{"people": 2}')]
    parked = asking(Question(id="tools", question="Waiting for your app"), tool_calls=calls)
    out = [e.model_dump(by_alias=True, exclude_none=True) for e in translator.take(parked)]
    assert [e["type"] for e in out] == [
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "STATE_DELTA",
        "RUN_FINISHED",
    ]
    assert out[0]["toolCallName"] == "confirm_booking" and out[1]["delta"] == '{"people": 2}'
    assert out[-1]["outcome"] == {"type": "success", "pendingToolCallIds": ["k1"]}


def test_an_approval_interrupt_carries_its_expiry() -> None:
    approval = Approval(
        approval_id="a1",
        request_id="r1",
        attempt=1,
        approvers=["p"],
        action="notify",
        arguments={"message": "hi"},
        digest="d",
        reason="policy",
        expires_at=datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC),
    )
    asked = asking(Question(id="approval", question="May I?"), approval=approval)
    finished = Translator(RUN).take(asked)[-1]
    dumped = finished.model_dump(by_alias=True, exclude_none=True)
    assert dumped["outcome"]["interrupts"][0]["expiresAt"] == "2030-01-02T03:04:05Z"
