"""Every guarantee is paid for in bus messages, on every request: each kind of request costs at
most its committed number of messages into nats-server, counted by the server itself (its
`in_msgs`: every publish, KV read and write, ack and pull request of every process, the
`budgets` bucket's included), in a steady state of one principal whose processes hold their
leases (how it is counted, and why the count does not depend on the machine's speed:
bench/ceiling.py).

The ceilings are the table below. Raising one is a visible diff: say why in its reason."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.ceiling import KINDS, Count, measure_all, start
from bench.system import Stack

# kind: (ceiling, why it costs that much). Measured on this branch: the ceiling is the count.
CEILINGS: dict[str, tuple[int, str]] = {
    "direct": (
        10,
        "gateway: session claim (with the note that the last answer was seen), record, index, "
        "chat.requested (with the session as written); frontline: ack, progress, one chunk, "
        "the session's write (from the stamp, no read), the record's end, the end; budgets: "
        "held and counted in the leases",
    ),
    "orchestrated_1": (
        26,
        "the direct's gateway part; frontline routes (ack, progress, request.routed, the "
        "session passed on); orchestrator: decision + dispatch in one write, then one write per "
        "step, a fresh read before the end, the session's write (from the copy request.routed "
        "brought); worker and evaluator: ack + answer each; 5 progress events; budgets in the "
        "leases",
    ),
    "orchestrated_3": (52, "orchestrated_1 and 13 per retry (4 writes/publishes per hop)"),
    "clarification": (
        57,
        "two requests' worth: the question parks it (parked key, session, and its holds "
        "parked in the budgets bucket: a read and a write for the day and the session), the "
        "answer resumes it (its record, request.answered, session) and a second attempt ends it",
    ),
}


@pytest.fixture(scope="module")
def quiet_system() -> Iterator[Stack]:
    """A system of its own, its nats-server's counters read by no one else."""
    stack = start()
    yield stack
    stack.stop()


async def test_each_kind_of_request_stays_under_its_message_ceiling(quiet_system: Stack) -> None:
    assert set(CEILINGS) == set(KINDS)
    counts: dict[str, Count] = await measure_all(quiet_system, list(KINDS))
    report = "\n".join(
        f"{kind}: {c.counted:g} per request (ceiling {CEILINGS[kind][0]}; of which budget bucket "
        f"{c.budget_each:g}; background {c.background_each:g} out; nats-server counted "
        f"{c.total} in {c.rounds} requests)"
        for kind, c in counts.items()
    )
    print(report)
    over = {kind: c.counted for kind, c in counts.items() if c.counted > CEILINGS[kind][0]}
    assert not over, f"over the ceiling: {over}\n{report}"
    # What is taken out is what the clock brings (a pull request or a watcher's call now and
    # then), never a request's own share.
    assert all(c.background <= 10 for c in counts.values()), report
