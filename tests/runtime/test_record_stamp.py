"""A `chat.requested` carries its record's stamp, so the frontline (and, from the routed
request, the orchestrator) rebuild the record exactly as the gateway stored it instead of
reading it; a record that does not match its stamp is not rebuilt (it is read)."""

from __future__ import annotations

from contracts import RequestRecord, RequestRouted, SessionRecord, Turn
from services.runtime.bus.kvstore import Versioned
from services.runtime.requests.lanes import record_from, request_of, small


def stored(**fields: object) -> Versioned[RequestRecord]:
    record = RequestRecord.model_validate(
        {
            "request_id": "r1",
            "session_id": "alice/s1",
            "principal": "alice",
            "text": "hello",
            "state": "accepted",
            "status": "started",
            "trace_id": "ab" * 16,
            **fields,
        }
    )
    return Versioned(record, 7)


def test_the_record_is_rebuilt_from_its_request_with_its_revision() -> None:
    for record in (
        stored(),
        stored(success_criteria="short", use_evaluator=False, preferences={"tone": "dry"}),
        stored(history=[Turn(role="user", content="earlier")], planned=True),
    ):
        assert record_from(request_of(record, [Turn(role="user", content="x")])) == record


def test_a_record_that_is_not_the_one_stamped_is_not_rebuilt() -> None:
    req = request_of(stored())
    assert req.record is not None
    other = req.model_copy(update={"message": "changed on the way"})
    assert record_from(other) is None
    assert record_from(req.model_copy(update={"record": None})) is None


def test_a_routed_request_rebuilds_it_unless_the_client_sent_its_own_turns() -> None:
    own_turns = stored(history=[Turn(role="user", content="a")])
    for record, rebuilt in ((stored(), True), (own_turns, False)):
        req = request_of(record)
        routed = RequestRouted(
            **req.model_dump(exclude={"kind", "event_id", "ts", "history", "session_turns"}),
            reason="tools",
        )
        assert (record_from(routed) == record) is rebuilt


def test_the_session_travels_as_written_unless_it_is_large() -> None:
    session = SessionRecord(
        turns=[Turn(role="user", content="hi", request_id="r0")], active="r1", queued=["r2"]
    )
    record = stored()
    req = request_of(record, session=Versioned(session, 3))
    assert req.session is not None and req.session_turns is None
    assert (req.session.record, req.session.revision) == (session, 3)
    # Routed, it goes on to the orchestrator, and rebuilds the record as before.
    routed = RequestRouted(
        **req.model_dump(exclude={"kind", "event_id", "ts", "history", "session_turns"}),
        reason="tools",
    )
    assert routed.session == req.session and record_from(routed) == record
    assert small(session)
    assert not small(SessionRecord(turns=[Turn(role="assistant", content="x" * 70_000)]))
    # A session not written yet (revision 0) has no stamp: the frontline reads it.
    assert request_of(stored(), session=Versioned(SessionRecord(), 0)).session is None
