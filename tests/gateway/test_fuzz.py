"""Property: whatever malformed frame a client sends, the gateway answers it with an error
frame, keeps the socket open, and every other session keeps working."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from websockets.sync.client import ClientConnection, connect

from contracts.frames import ErrorCode, InitFrame, MessageFrame, SessionFrame
from services.gateway.ws.endpoint import message_text
from tests.support.gateway_client import bearer
from tests.support.harness import System

PRINCIPAL = "walter"
MAX_MESSAGE_CHARS = 500  # the secure system's SIDEKICK_MAX_MESSAGE_CHARS
CODES: set[ErrorCode] = {
    "invalid_json",
    "invalid_frame",
    "frame_too_large",
    "not_found",
    "message_too_long",
}
KEYS = (
    "init",
    "uuid",
    "message",
    "cancel",
    "events",
    "request_id",
    "reply_to",
    "success_criteria",
    "use_evaluator",
    "skip_cache",
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)
objects = st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=6), json_values, max_size=5)
near_valid = st.fixed_dictionaries(
    {"uuid": st.sampled_from(["ok-uuid", "", "has space", "x" * 200]), "message": json_values}
)
cancels = st.fixed_dictionaries({"cancel": st.text(max_size=40) | json_values})


def is_answered_without_error(frame: str | bytes) -> bool:
    """Frames the gateway rightly takes: valid inits and messages (those start real work)."""
    if isinstance(frame, bytes) or len(frame.encode()) > 65536:
        return False
    try:
        data = json.loads(frame)
    except ValueError:
        return False
    if not isinstance(data, dict):
        return False
    if "auth" in data:  # a wrong token ends the socket, by design: not fuzzed here
        return True
    try:
        if data.get("init") is True:
            InitFrame.model_validate(data)
            return True
        if "message" in data:
            text = message_text(MessageFrame.model_validate(data))
            return bool(text) and len(text) <= MAX_MESSAGE_CHARS
        if "cancel" not in data and "uuid" in data:  # any frame with a uuid sets the session
            SessionFrame.model_validate(data)
            return True
    except ValidationError:
        return False
    return False


frames = (
    st.text(max_size=200)
    | objects.map(json.dumps)
    | near_valid.map(json.dumps)
    | cancels.map(json.dumps)
    | json_values.map(json.dumps)
    | st.binary(max_size=64)
    | st.integers(65_537, 70_000).map(lambda n: json.dumps({"message": "x" * n}))
).filter(lambda f: not is_answered_without_error(f))


@contextmanager
def open_socket(system: System, uuid: str, events: bool = False) -> Iterator[ClientConnection]:
    with connect(system.ws_url, additional_headers=bearer(PRINCIPAL), max_size=None) as ws:
        ws.send(json.dumps({"init": True, "uuid": uuid, "events": events}))
        if events:
            assert json.loads(ws.recv(10)) == {"event": "ready", "uuid": uuid}
        yield ws


def recv(ws: ClientConnection) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(ws.recv(10))
    return data


def test_malformed_frames_always_get_an_error_frame_and_break_nothing(
    secure_system: System,
) -> None:
    @settings(
        max_examples=60,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(st.lists(frames, min_size=1, max_size=5))
    def fuzz(batch: list[str | bytes]) -> None:
        # Events mode: errors come as error frames (an old client gets them as text and an end).
        with open_socket(secure_system, "fuzzed", events=True) as ws:
            for frame in batch:
                ws.send(frame)
                reply = recv(ws)
                assert reply["error"]["code"] in CODES, (frame, reply)
            # The same socket still works, and so does another session's.
            ws.send(json.dumps({"init": True, "uuid": "fuzzed", "events": True}))
            assert recv(ws)["event"] == "ready"
        with open_socket(secure_system, "bystander", events=True):
            pass

    fuzz()
    assert secure_system.procs["gateway"].poll() is None, "the gateway is still running"
    with open_socket(secure_system, "after-the-fuzz") as ws:
        ws.send(json.dumps({"uuid": "after-the-fuzz", "message": "hello"}))
        frames_seen: list[dict[str, Any]] = []
        while not frames_seen or "on_chat_model_end" not in frames_seen[-1]:
            frames_seen.append(recv(ws))
    text = "".join(f.get("on_chat_model_stream", "") for f in frames_seen)
    assert text and not [f for f in frames_seen if "error" in f]
