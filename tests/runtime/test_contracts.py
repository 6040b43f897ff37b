"""The wire format: committed schemas and the AsyncAPI document match the models, the bus
table matches the services, events round-trip, and client frames parse as their unions."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, cast

import pytest
from pydantic import ValidationError
from starlette.websockets import WebSocket

from contracts import (
    ChatRequested,
    ClarificationRequested,
    Question,
    RequestCancelled,
    RequestCompleted,
    RequestFailed,
    Subjects,
    Verdict,
    parse_event,
)
from contracts.asyncapi import document
from contracts.channels import CHANNELS
from contracts.frames import (
    CLIENT_FRAME,
    SERVER_FRAME,
    AuthFrame,
    CancelFrame,
    InitFrame,
    MessageFrame,
)
from contracts.schema_files import ASYNCAPI, MODELS, SCHEMA_DIR, render
from services.gateway.ws.connection import Connection
from services.gateway.ws.frames import outcome_frames
from services.runtime.base.settings import Settings
from services.runtime.bus.natsauth import SERVICES, permissions
from services.runtime.llm import strict_schema

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("name", sorted(MODELS))
def test_committed_schema_matches_the_model(name: str) -> None:
    path = SCHEMA_DIR / f"{name}.json"
    assert path.exists(), f"missing {path}; run python -m contracts.schema_files"
    assert path.read_text() == render(MODELS[name]), (
        f"{name} changed on the wire; review and run python -m contracts.schema_files"
    )


def test_every_event_round_trips_through_the_union() -> None:
    event = ChatRequested(request_id="r1", session_id="p/s1", message="hi")
    again = parse_event(event.model_dump_json())
    assert again == event
    assert isinstance(again.ts, datetime) and again.ts.tzinfo is not None


def test_events_reject_unknown_fields_and_naive_times() -> None:
    data = json.loads(ChatRequested(request_id="r", session_id="s", message="m").model_dump_json())
    with pytest.raises(ValidationError):
        parse_event(json.dumps({**data, "surprise": 1}))
    with pytest.raises(ValidationError):
        parse_event(json.dumps({**data, "ts": "2026-01-01T00:00:00"}))


def test_a_completed_event_needs_a_known_status() -> None:
    with pytest.raises(ValidationError):
        RequestCompleted(request_id="r", session_id="s", status="done", output="x", route="direct")


def test_subjects_live_under_their_namespace() -> None:
    s = Subjects("abc")
    assert s.chat_requested == "abc.chat.requested"
    assert s.worker_run("SEARCH") == "abc.worker.search.run"
    assert s.work_stream == "ABC_WORK"
    assert all(subject.startswith("abc.") for subject in s.work_subjects)


def test_strict_schema_closes_every_object_and_requires_every_field() -> None:
    schema = strict_schema(Verdict)
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == set(schema["properties"])
    assert "default" not in json.dumps(schema)


def test_the_committed_asyncapi_document_matches_the_bus_table() -> None:
    assert ASYNCAPI.read_text() == document(), (
        "the bus changed; review and run python -m contracts.schema_files"
    )


def _matches(pattern: str, subject: str) -> bool:
    want, have = pattern.split("."), subject.split(".")
    for i, token in enumerate(want):
        if token == ">":
            return len(have) > i
        if i >= len(have) or token not in ("*", have[i]):
            return False
    return len(want) == len(have)


def _sample(ns: str, template: str, service: str) -> str:
    """A concrete subject of a channel: {source} is the service, other placeholders a token."""
    return f"{ns}." + template.format(kind="general", request_id="r1", session="s1", source=service)


def _subscriptions(ns: str) -> dict[str, list[str]]:
    from services.evaluator import app as evaluator
    from services.frontline import app as frontline
    from services.gateway import app as gateway
    from services.orchestrator import app as orchestrator
    from services.workers import app as workers

    settings = Settings(namespace=ns, workers="GENERAL")
    subs = {}
    for name, module in zip(
        SERVICES, (gateway, frontline, orchestrator, evaluator, workers), strict=True
    ):
        host = module.build(settings)
        subs[name] = host.bus.subscriptions()
    return subs


def test_the_bus_table_says_who_consumes_and_may_publish_each_subject() -> None:
    ns = "tbl"
    subs = _subscriptions(ns)
    for channel in CHANNELS:
        for service in SERVICES:
            subject = _sample(ns, channel.subject, service)
            heard = any(_matches(p, subject) for p in subs[service])
            assert heard == (service in channel.consumers), (channel.subject, service, subs)
        for service in channel.producers:
            subject = _sample(ns, channel.subject, service)
            allowed = permissions(service, ns).publish
            assert any(_matches(p, subject) for p in allowed), (channel.subject, service)
    for service, patterns in subs.items():
        for pattern in patterns:
            if pattern.startswith("$JS."):
                continue  # the server's advisories, not Sidekick's subjects
            assert any(
                service in c.consumers and _matches(pattern, _sample(ns, c.subject, service))
                for c in CHANNELS
            ), f"{service} subscribes {pattern}, which the bus table does not list"


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        ({"auth": "tok"}, AuthFrame),
        ({"init": True, "uuid": "u1", "events": True}, InitFrame),
        ({"uuid": "u1", "message": "hi", "extra": 1}, MessageFrame),
        ({"cancel": "r1"}, CancelFrame),
    ],
)
def test_client_frames_parse_as_their_union_member(data: dict[str, Any], kind: type) -> None:
    assert isinstance(CLIENT_FRAME.validate_python(data), kind)


def test_an_unknown_client_frame_is_refused_by_the_union() -> None:
    with pytest.raises(ValidationError) as caught:
        CLIENT_FRAME.validate_python({"hello": "there"})
    assert caught.value.errors()[0]["type"] == "unknown_frame"


OUTCOMES = [
    RequestCompleted(
        request_id="r1", session_id="p/s", status="completed", output="Hi.", route="direct"
    ),
    RequestFailed(request_id="r1", session_id="p/s", code="worker_failed", error="Nope."),
    RequestCancelled(request_id="r1", session_id="p/s", reason="user"),
    ClarificationRequested(
        request_id="r1",
        session_id="p/s",
        questions=[Question(id="q1", question="Where?")],
        source="planner",
    ),
]
SEED_KEYS = {"on_chat_model_stream", "on_chat_model_end", "error"}


@pytest.mark.parametrize("outcome", OUTCOMES, ids=lambda o: o.kind)
@pytest.mark.parametrize("events", [False, True], ids=["legacy", "events"])
def test_every_frame_the_gateway_sends_is_a_server_frame(outcome: Any, events: bool) -> None:
    conn = Connection(cast(WebSocket, None), events=events)
    for frame in outcome_frames(conn, outcome):
        data = json.loads(frame.wire())
        assert SERVER_FRAME.validate_python(data) == frame
        if not events:
            assert set(data) <= SEED_KEYS, data
            assert "request_id" not in json.dumps(data), "old clients see only the seed's keys"


def test_every_progress_field_reaches_event_clients() -> None:
    # The gateway turns each bus Progress into a ProgressEvent frame field for field; a field
    # added to one and not the other made every progress frame fail to build (and be dropped).
    from contracts.events import Progress
    from contracts.frames import ProgressEvent

    bus_fields = set(Progress.model_fields) - {"kind"}
    frame_fields = set(ProgressEvent.model_fields) - {"event"}
    assert bus_fields == frame_fields
    event = Progress(
        request_id="r", session_id="s", stage="worker_step", workflow_status="planning"
    )
    frame = ProgressEvent.model_validate(
        {"event": "progress", **event.model_dump(exclude={"kind"})}
    )
    assert frame.workflow_status == "planning"
