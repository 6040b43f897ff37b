"""A request's life in one place: its states, the legal moves between them as one table, who
may make each move (table.py, re-exported here), and `Requests.move`, the one compare-and-set
every service uses to change a request's record. No service writes a request record any other
way.

A request's record (`contracts.state.RequestRecord`, key: request id, bucket `status`) is
created by the gateway when it accepts the message and then only moved along `TABLE`. Every
move is a compare-and-set on the key's revision, so two services racing to move one request
(a cancel and a finishing answer, two replicas, a redelivery) cannot both win: the first write
stands and the loser finds the request already moved. Terminal states have no way out, which
is what makes the first outcome the only one.

`docs/architecture.md` shows the table as a state diagram;
`python -m services.runtime.requests.lifecycle` regenerates it (a test fails when it drifts).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from nats.js.kv import KeyValue

from contracts import (
    ClarificationRequested,
    Outcome,
    RequestCancelled,
    RequestCompleted,
    RequestFailed,
    RequestRecord,
    RequestState,
    utcnow,
)
from services.runtime.base.errors import SidekickError
from services.runtime.bus.kvstore import Versioned, compare_and_set, get_model, write_if
from services.runtime.requests.table import (
    ACTORS,
    ANY,
    DOC,
    EITHER,
    FRONT,
    LEGAL,
    ORCH,
    PARKED,
    STATES,
    STATUS,
    TABLE,
    Actor,
    Move,
    allowed,
    reachable,
    rendered,
)

if TYPE_CHECKING:
    from services.runtime.bus.core import Bus

__all__ = [
    "ACTORS",
    "ANY",
    "DOC",
    "EITHER",
    "FRONT",
    "LEGAL",
    "ORCH",
    "PARKED",
    "STATES",
    "STATUS",
    "TABLE",
    "Actor",
    "IllegalMove",
    "Move",
    "Planned",
    "Requests",
    "Tracked",
    "allowed",
    "reachable",
    "records",
    "rendered",
    "state_of",
]


def state_of(outcome: Outcome) -> RequestState:
    """The state an outcome puts its request in."""
    if isinstance(outcome, RequestCompleted):
        return outcome.status
    if isinstance(outcome, RequestFailed):
        return "failed"
    if isinstance(outcome, RequestCancelled):
        return "cancelled"
    return "awaiting_approval" if outcome.approval is not None else "awaiting_clarification"


class IllegalMove(SidekickError):
    """The table does not allow this move from the state the request is in (or there is no
    such request: `current` is None). Nothing was written."""

    def __init__(
        self, current: Versioned[RequestRecord] | None, target: RequestState, by: Actor
    ) -> None:
        self.current = current
        self.target = target
        self.by = by
        where = current.value.state if current is not None else "nowhere (no such request)"
        super().__init__(f"{by} may not move a request from {where} to {target}")


Tracked = Versioned[RequestRecord]
Planned = tuple[RequestState, dict[str, Any]]
"""A move a caller plans from the record it is shown: where to, and what else changes."""


def records(bus: Bus) -> Requests:
    """The request records of the bus's namespace, moved as the bus's service."""
    return Requests(bus.kv.status, bus.service)


class Requests:
    """The request records of one namespace, as seen and moved by one actor (a service)."""

    ATTEMPTS = 20

    def __init__(self, kv: KeyValue, by: str) -> None:
        if by not in ACTORS:
            raise ValueError(f"{by!r} moves no request; actors: {', '.join(ACTORS)}")
        self.kv = kv
        self.by: Actor = by

    async def load(self, request_id: str) -> Tracked | None:
        record, revision = await get_model(self.kv, request_id, RequestRecord)
        return Versioned(record, revision) if record is not None else None

    async def create(self, record: RequestRecord) -> Tracked | None:
        """Store a new request; None when the id is already taken."""
        if not allowed(None, record.state, self.by):
            raise IllegalMove(None, record.state, self.by)
        record = record.model_copy(update={"status": STATUS[record.state]})
        revision = await write_if(self.kv, record.request_id, record, 0)
        return Versioned(record, revision) if revision is not None else None

    async def move(
        self,
        request_id: str,
        target: RequestState,
        *,
        known: Tracked | None = None,
        source: RequestState | None = None,
        via: tuple[RequestState, ...] = (),
        **changes: Any,
    ) -> Tracked:
        """Move the request to `target`, setting `changes` on its record, by compare-and-set
        (from `known` first when the caller has just read or written it), through the states
        `via` in the same write when the table allows that (`reachable`). Moving to where it
        already is with nothing to change writes nothing. Raises IllegalMove when the table
        forbids the move from the state found, or when `source` is given and the request is
        not there (of racing movers from `source`, exactly one succeeds)."""

        def decide(current: Tracked | None) -> RequestRecord | None:
            if current is None or (source is not None and current.value.state != source):
                raise IllegalMove(current, target, self.by)
            return self._checked(current, target, changes, via)

        return await self._write(request_id, decide, known)

    async def change(
        self,
        request_id: str,
        plan: Callable[[RequestRecord], Planned | None],
        *,
        known: Tracked | None = None,
        via: tuple[RequestState, ...] = (),
    ) -> Tracked:
        """Move the request as `plan` says from the record found: `(target, changes)`, or None
        to write nothing. `plan` is asked again on each read (a failed write, or a plan of
        nothing on the remembered `known`, reads the record again), so it decides on a record
        proven current. Raises IllegalMove when the table forbids the move (through `via`)."""

        def decide(current: Tracked | None) -> RequestRecord | None:
            if current is None:
                raise LookupError(f"no request {request_id}")
            planned = plan(current.value)
            if planned is None:
                return None
            target, changes = planned
            return self._checked(current, target, changes, via)

        return await self._write(request_id, decide, known)

    def _checked(
        self,
        current: Tracked,
        target: RequestState,
        changes: dict[str, Any],
        via: tuple[RequestState, ...],
    ) -> RequestRecord | None:
        """The record moved to `target` with `changes` (None: nothing to write); IllegalMove
        when the table forbids this actor the move (through `via`)."""
        updated = _moved(current.value, target, changes)
        if updated is not None and not reachable(current.value.state, target, self.by, via):
            raise IllegalMove(current, target, self.by)
        return updated

    async def _write(
        self,
        request_id: str,
        decide: Callable[[Tracked | None], RequestRecord | None],
        known: Tracked | None,
    ) -> Tracked:
        """One compare-and-set of the record as `decide` says; a refusal or a no-op found on
        `known` is checked on a fresh read (kvstore.py)."""
        done = await compare_and_set(
            self.kv, request_id, RequestRecord, decide, known=known, attempts=self.ATTEMPTS
        )
        assert done is not None  # decide() refuses a request that is not there
        return done

    async def hide(self, request_id: str) -> Tracked | None:
        """Mark the request deleted by its owner (the API no longer lists or finds it), in
        whatever state it is: not a move, so any actor's moves keep going around it."""
        for _ in range(self.ATTEMPTS):
            current = await self.load(request_id)
            if current is None or current.value.hidden:
                return current
            hidden = current.value.model_copy(update={"hidden": True, "updated_at": utcnow()})
            revision = await write_if(self.kv, request_id, hidden, current.revision)
            if revision is not None:
                return Versioned(hidden, revision)
        raise RuntimeError(f"could not hide request {request_id} (contention)")

    async def notify(self, request_id: str) -> Tracked | None:
        """Mark the request as one a client is notified of (`push`: its steps, questions and
        end go on its push subjects too), in whatever state it is but an end: not a move, so
        any actor's moves keep going around it. A mover whose write loses to this one reads
        the record again and sees the mark; one that ended the request first is seen here
        (the record is returned ended and unmarked: the caller pushes the end itself). None:
        no such request."""
        for _ in range(self.ATTEMPTS):
            current = await self.load(request_id)
            if current is None or current.value.push or current.value.ended:
                return current
            marked = current.value.model_copy(update={"push": True})
            revision = await write_if(self.kv, request_id, marked, current.revision)
            if revision is not None:
                return Versioned(marked, revision)
        raise RuntimeError(f"could not mark request {request_id} as notified (contention)")

    async def end(self, outcome: Outcome, *, known: Tracked | None = None) -> Tracked:
        """Record how the request ended (or that it waits for the user). The first end stands:
        when the request has already ended, or already waits with its questions, its record is
        returned unchanged and `record.outcome` is the outcome that counts."""
        return (await self.settle(outcome, known=known))[0]

    async def settle(
        self,
        outcome: Outcome,
        *,
        known: Tracked | None = None,
        via: tuple[RequestState, ...] = (),
        **changes: Any,
    ) -> tuple[Tracked, bool]:
        """`end`, also saying whether this call made the move (False: the request had already
        ended or parked, by this outcome or another; `known` may be stale: a failed write
        reads the record again, and so does finding it ended or parked in `known`). `via`: the
        states the move may pass through in the same write (`reachable`); `changes`: more
        fields set in the same write (the orchestrator's loop state)."""
        target = state_of(outcome)
        made = False

        def decide(current: Tracked | None) -> RequestRecord | None:
            nonlocal made
            made = False
            if current is not None and (current.value.ended or current.value.state == target):
                return None
            if current is None:
                raise IllegalMove(None, target, self.by)
            updated = _moved(current.value, target, {**_fields(outcome), **changes})
            if updated is not None and not reachable(current.value.state, target, self.by, via):
                raise IllegalMove(current, target, self.by)
            made = updated is not None
            return updated

        # "Already ended or parked" found on `known` is checked on a fresh read: the request
        # may have been answered and gone on since (kvstore.py).
        done = await compare_and_set(
            self.kv, outcome.request_id, RequestRecord, decide, known=known, attempts=self.ATTEMPTS
        )
        assert done is not None  # decide() refuses a request that is not there
        return done, made


def _moved(
    record: RequestRecord, target: RequestState, changes: dict[str, Any]
) -> RequestRecord | None:
    """The record after the move, or None when nothing would change."""
    update: dict[str, Any] = {"state": target, **changes}
    if target != record.state:
        update.setdefault("status", STATUS[target])
    if target in ("completed", "partial", "failed", "cancelled"):
        update.setdefault("completed_at", record.completed_at or utcnow())
    current = record.model_dump()
    if all(current.get(k) == _plain(v) for k, v in update.items()):
        return None
    return record.model_validate({**current, **update, "updated_at": utcnow()})


def _plain(value: Any) -> Any:
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if hasattr(value, "model_dump"):
        return value.model_dump()
    return value


def _fields(outcome: Outcome) -> dict[str, Any]:
    """What an outcome changes on its request's record."""
    if isinstance(outcome, ClarificationRequested):
        return {"outcome": outcome, "clarification_questions": list(outcome.questions)}
    done: dict[str, Any] = {
        "outcome": outcome,
        "clarification_questions": [],
        "trace_id": outcome.trace_id,
    }
    if isinstance(outcome, RequestCompleted):
        return {
            **done,
            "final_output": outcome.output,
            "cached": outcome.route == "cached",
            "worker_type": outcome.worker_type,
        }
    if isinstance(outcome, RequestFailed):
        return {**done, "error": outcome.error}
    return {**done, "error": outcome.reason}


if __name__ == "__main__":
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / DOC
    path.write_text(rendered(path.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote the lifecycle diagram into {path}")
