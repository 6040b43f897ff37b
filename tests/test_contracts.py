"""The wire format: committed schemas match the models, and events round-trip."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from pydantic import ValidationError

from contracts import ChatRequested, RequestCompleted, Subjects, Verdict, parse_event
from contracts.schema_files import MODELS, SCHEMA_DIR, render
from services.runtime.llm import strict_schema


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
