"""The messages into nats-server that one request of each kind costs, counted at the server
(its `/varz` `in_msgs`: every publish, KV read and write, ack and pull request of every
process), with nothing else running: the numbers tests/runtime/test_message_ceiling.py holds
to its committed ceilings.

    python -m bench.ceiling

Each kind of request is sent on its own, in a session of its own, and counted until the system
is quiet again (`SETTLE` seconds after its end: what a request causes later, such as the
gateway's note that its answer was seen, is counted too). The counts do not depend on the
machine's speed: the fake model writes a streamed answer as one delta (how many chunks a
client gets does not depend on how fast it is read), the services have been listening longer
than a cancel's clock skew (a worker reads the cancel flags only for work issued before it
listened), and two kinds of messages that come with the passing of time, not with requests,
are taken out: the consumers' pull requests and the bucket watchers' consumer calls (both
`$JS.API.CONSUMER.>`, seen by a subscription to every subject). The messages of the `budgets`
bucket are counted apart (`budget`).
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

SETTLE = 3.0  # seconds of quiet after a request's end (the delivery note waits 2 s)
LISTENING = 12.0  # seconds the services listen before the first count (cancel clock skew: 10)
REPEATS = 2

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
    """One request's messages into nats-server: `total` (varz), and what of it was time's
    (`background`) and the budget bucket's (`budget`), seen on the wire."""

    total: int
    background: int
    budget: int
    subjects: Counter[str] = field(default_factory=Counter)

    @property
    def counted(self) -> int:
        """What the ceiling holds: the request's messages, the budget bucket's apart."""
        return self.total - self.background - self.budget


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
        elif f"{self.namespace}_budgets" in subject:
            self.budget += 1
        else:
            self.subjects[subject_kind(subject, self.namespace)] += 1


async def _measure(stack: Stack, kind: str, wire: Wire) -> Count:
    session = await Session(stack.ws_url, stack.token(0)).open()
    try:
        await asyncio.sleep(SETTLE)  # the socket's own start (its replay) is not the request's
        wire.reset()
        before = stack.nats_counters()["in_msgs"]
        for message, expect in KINDS[kind]:
            out = await session.request(message, expect)
            if out.error is not None:
                raise RuntimeError(f"{kind}: {message!r} -> {out.error}: {out.text!r}")
            await asyncio.sleep(SETTLE)
        total = stack.nats_counters()["in_msgs"] - before
        return Count(total, wire.background, wire.budget, wire.subjects)
    finally:
        await session.close()


async def measure_all(stack: Stack, kinds: list[str], repeats: int = REPEATS) -> dict[str, Count]:
    """The fewest messages each kind took in `repeats` tries (time-driven extras only add)."""
    wire = Wire(stack.namespace)
    nc = await nats.connect(stack.nats_url)
    await nc.subscribe(">", cb=wire.on)
    try:
        best: dict[str, Count] = {}
        for kind in kinds:
            for _ in range(repeats):
                got = await _measure(stack, kind, wire)
                if kind not in best or got.counted < best[kind].counted:
                    best[kind] = got
        return best
    finally:
        await nc.close()


def start() -> Stack:
    stack = Stack(max_concurrency=64, principals=1).start()
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
    print("messages into nats-server per request (budget bucket apart; background out)")
    for kind, c in counts.items():
        print(
            f"  {kind:<16}{c.counted:>5}   budget {c.budget:>3}   background {c.background:>3}"
            f"   varz {c.total:>4}"
        )
    for name, c in counts.items():
        print(f"\n{name}: by subject (client publishes seen; varz counts a few the wire hides)")
        for subject, n in c.subjects.most_common():
            print(f"  {n:>4}  {subject}")
    print(json.dumps({k: c.counted for k, c in counts.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
