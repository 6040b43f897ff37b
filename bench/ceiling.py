"""The messages into nats-server that one request of each kind costs, counted at the server
(its `/varz` `in_msgs`: every publish, KV read and write, ack and pull request of every
process, the `budgets` bucket's included), in a steady state of one principal: the numbers
tests/runtime/test_message_ceiling.py holds to its committed ceilings.

    python -m bench.ceiling

Each kind of request is sent in a session of its own: `WARM` requests first, so that every
process that serves it holds a lease of the principal's day and of the session (and the
gateway's admission reuses its reading of them), then `ROUNDS` requests one after the other,
counted from just before the first until the system is quiet again after the last (`SETTLE`
seconds); the count is their mean. A request that follows another in its session carries the
note that the one before was seen (services/gateway/core/deliveries.py), so each counted
request pays for one such note, as in a conversation.

The counts do not depend on the machine's speed. The fake model writes a streamed answer as one
delta (how many chunks a client gets does not depend on how fast it is read); the services
have been listening longer than a cancel's clock skew (a worker reads the cancel flags only for
work issued before it listened); the budget's time-driven writes are put out of the measured
minutes by settings (`BUDGET_ENV`: a lease lasts an hour, a batch is written every hour, an
unused lease is returned after an hour, the gateway reuses its reading of a busy principal's
day for an hour), so a request is counted with what its own steps write to the `budgets`
bucket, and not with a flush or a renewal that the clock happens to bring into its window (at
the default settings those cost one write per process and principal every 2 s, however many
requests share them: docs/budgets.md); and two kinds of messages that come with the passing of
time, not with requests, are taken out: the consumers' pull requests and the bucket watchers'
consumer calls (both `$JS.API.CONSUMER.>`, seen by a subscription to every subject). The
`budgets` bucket's messages are shown apart too (`budget`), and counted.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass, field

import nats
from nats.aio.msg import Msg

from bench.client import Session
from bench.messages import kind as subject_kind
from bench.system import Stack
from services.runtime.base.eventloop import run_loop

SETTLE = 2.0  # seconds of quiet after the last counted request's end (its acks, its writes)
LISTENING = 12.0  # seconds the services listen before the first count (cancel clock skew: 10)
WARM = 5  # requests before the count: a process leases a principal's day from its 4th step
ROUNDS = 4  # requests counted, one after the other
REPEATS = 2
HOUR = "3600"
BUDGET_ENV = {
    "SIDEKICK_BUDGET_LEASE_SECONDS": HOUR,
    "SIDEKICK_BUDGET_FLUSH_SECONDS": HOUR,
    "SIDEKICK_BUDGET_IDLE_SECONDS": HOUR,
    "SIDEKICK_BUDGET_ADMISSION_SECONDS": HOUR,
}

# Each kind: the messages a client sends in turn, each with what its answer must contain.
KINDS: dict[str, list[tuple[str, str]]] = {
    "direct": [("hello there", "help you today")],
    "orchestrated_1": [("please look this up #orch", "ATTEMPT=1")],
    "orchestrated_3": [("please look this up #orch #fail2", "ATTEMPT=3")],
    "clarification": [
        ("what is the weather #orch #ask", "more information"),
        ("Lisbon", "ATTEMPT=2"),
    ],
}


@dataclass
class Count:
    """`rounds` requests' messages into nats-server: `total` (varz), and what of it was time's
    (`background`) and the budget bucket's (`budget`), seen on the wire."""

    total: int
    background: int
    budget: int
    rounds: int = 1
    subjects: Counter[str] = field(default_factory=Counter)

    @property
    def counted(self) -> float:
        """What the ceiling holds: one request's messages (the mean of the rounds), the budget
        bucket's included, the clock's out."""
        return (self.total - self.background) / self.rounds

    @property
    def budget_each(self) -> float:
        return self.budget / self.rounds

    @property
    def background_each(self) -> float:
        return self.background / self.rounds


class Wire:
    """Every message on every subject, while on: the time-driven ones and the budget's."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.background = 0
        self.budget = 0
        self.subjects: Counter[str] = Counter()

    def reset(self) -> None:
        self.background = self.budget = 0
        self.subjects = Counter()

    async def on(self, msg: Msg) -> None:
        subject = msg.subject
        if subject.startswith("_INBOX") or (msg.reply or "").startswith("$JS.ACK."):
            return  # the server's: a reply, or a consumer's delivery (not into it)
        if subject.startswith("$JS.API.CONSUMER."):
            self.background += 1
        else:
            if f"{self.namespace}_budgets" in subject:
                self.budget += 1
            self.subjects[subject_kind(subject, self.namespace)] += 1


async def _round(session: Session, kind: str) -> None:
    for message, expect in KINDS[kind]:
        out = await session.request(message, expect)
        if out.error is not None:
            raise RuntimeError(f"{kind}: {message!r} -> {out.error}: {out.text!r}")


async def _measure(stack: Stack, kind: str, wire: Wire, rounds: int) -> Count:
    session = await Session(stack.ws_url, stack.token(0)).open()
    try:
        for _ in range(WARM):
            await _round(session, kind)
        await asyncio.sleep(SETTLE)  # what the warm requests cause is not counted
        wire.reset()
        before = stack.nats_counters()["in_msgs"]
        for _ in range(rounds):
            await _round(session, kind)
        await asyncio.sleep(SETTLE)
        total = stack.nats_counters()["in_msgs"] - before
        return Count(total, wire.background, wire.budget, rounds, Counter(wire.subjects))
    finally:
        await session.close()


async def measure_all(
    stack: Stack, kinds: list[str], repeats: int = REPEATS, rounds: int = ROUNDS
) -> dict[str, Count]:
    """The fewest messages each kind took in `repeats` tries (time-driven extras only add)."""
    wire = Wire(stack.namespace)
    nc = await nats.connect(stack.nats_url)
    await nc.subscribe(">", cb=wire.on)
    try:
        best: dict[str, Count] = {}
        for kind in kinds:
            for _ in range(repeats):
                got = await _measure(stack, kind, wire, rounds)
                if kind not in best or got.counted < best[kind].counted:
                    best[kind] = got
        return best
    finally:
        await nc.close()


def start() -> Stack:
    stack = Stack(max_concurrency=64, principals=1, extra_env=dict(BUDGET_ENV)).start()
    stack.model.configure(latency_ms=0, token_gap_ms=0, one_delta=True)
    time.sleep(LISTENING)
    return stack


def main(argv: list[str] | None = None) -> int:
    kinds = list(argv or sys.argv[1:]) or list(KINDS)
    stack = start()
    try:
        counts = run_loop(measure_all(stack, kinds))
    finally:
        stack.stop()
    print("messages into nats-server per request (budget bucket included; background out)")
    for kind, c in counts.items():
        print(
            f"  {kind:<16}{c.counted:>7.2f}   of which budget {c.budget_each:>5.2f}"
            f"   background {c.background_each:>5.2f}   varz {c.total / c.rounds:>7.2f}"
        )
    for name, c in counts.items():
        print(f"\n{name}: per request by subject (client publishes seen; not all are in varz)")
        for subject, n in c.subjects.most_common():
            print(f"  {n / c.rounds:>6.2f}  {subject}")
    print(json.dumps({k: round(c.counted, 2) for k, c in counts.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
