"""A request's `seal` (the secret its end's dedupe keys carry, services/runtime/requests/
outcomes.py) stays with the roles that read its record: the views every surface builds of a
record (the request's timeline, the workflow view, the A2A task) are made from named fields,
and the seal is none of them; the record's stamp carries it, so the rebuilt record is the one
stored."""

from __future__ import annotations

import pytest

from contracts import RequestCompleted, RequestRecord
from services.gateway.a2a.tasks import task_of
from services.gateway.requests.timeline import build
from services.gateway.workflows.views import view
from services.runtime.bus.kvstore import Versioned
from services.runtime.requests.lanes import record_from, request_of
from services.runtime.requests.outcomes import end_key
from tests.support.results import ended_record

pytestmark = pytest.mark.fast

SEAL = "5ea15ea15ea15ea1"


def sealed(**fields: object) -> RequestRecord:
    return ended_record(seal=SEAL, **fields)


def ended() -> RequestCompleted:
    return RequestCompleted(
        request_id="r1", session_id="alice/s1", status="completed", output="done", route="direct"
    )


def test_no_view_of_a_record_carries_its_seal() -> None:
    record = sealed(outcome=ended(), final_output="done")
    shown = [
        build(record, "s1", lambda _: 0.0).model_dump_json(),
        view(record).model_dump_json(),
        task_of(record).model_dump_json(),
    ]
    for body in shown:
        assert "done" in body, body  # the views are of this record
        assert SEAL not in body, body


def test_the_seal_travels_in_the_stamp_and_seals_the_end() -> None:
    record = Versioned(sealed(state="accepted", status="started"), 3)
    req = request_of(record)
    assert req.record is not None and req.record.seal == SEAL
    assert record_from(req) == record
    # Sealed keys differ from the plain ones a worker could compute; no seal: the plain key.
    assert end_key(ended(), SEAL) == f"r1:final:{SEAL}"
    assert end_key(ended(), SEAL, "push.") == f"r1:push.final:{SEAL}"
    assert end_key(ended(), "") == "r1:final"
