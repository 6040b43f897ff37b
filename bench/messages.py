"""Which NATS messages one request costs: start the bench's system, listen to every subject
(`>`: client publishes, JetStream API requests, KV writes, acks, pull requests, replies), send
N requests of one path one at a time, and print the messages per request by kind of subject.

    python -m bench.messages --path orchestrated_1 --requests 50

A wildcard subscription sees what clients publish and what the server sends to clients'
subjects; it does not see the server's internal traffic, so the total is close to, not equal
to, nats-server's own counters. The last lines give those: the messages into nats-server per
request (its `in_msgs`: every publish, KV read and write, ack and pull request of every
process), and what the results stream stored per request (messages and bytes: what a client
that re-attaches reads back).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from collections import Counter

import nats

from bench.client import EXPECT, PATHS, Session
from bench.system import Stack
from contracts import Subjects
from services.runtime.base.eventloop import run_loop

# Request ids, session hashes, sequence numbers and inbox tokens vary per message.
_VARYING = (
    (re.compile(r"\$JS\.ACK\..*"), "$JS.ACK.<consumer>"),
    (re.compile(r"^_INBOX_([a-z]+)\..*"), r"<\1's inbox>"),
    (re.compile(r"^_INBOX\..*"), "<inbox>"),
    (re.compile(r"\.out\.[^.]+\.[^.]+\.(\w+)$"), r".out.*.*.\1"),
    (re.compile(r"\.out\.[^.]+\.session$"), ".out.*.session"),
    (re.compile(r"\.out\.[^.]+\.(\w+)$"), r".out.*.\1"),  # before subjects named the session
    (re.compile(r"\$KV\.([^.]+)\..*"), r"$KV.\1.<key>"),
    (re.compile(r"(\$JS\.API\.DIRECT\.GET\.[^.]+)\..*"), r"\1.<key>"),
    (re.compile(r"(\$JS\.API\.CONSUMER\.MSG\.NEXT\.[^.]+)\..*"), r"\1.<consumer>"),
    (re.compile(r"\$JS\.EVENT\.ADVISORY\..*"), "$JS.EVENT.ADVISORY.*"),
)


def kind(subject: str, namespace: str) -> str:
    subject = subject.replace(namespace, "<ns>")
    for pattern, repl in _VARYING:
        subject = pattern.sub(repl, subject)
    return subject


async def stored(nc: nats.NATS, stack: Stack) -> tuple[int, int]:
    """Messages and bytes in the results stream now."""
    info = await nc.jetstream().stream_info(Subjects(stack.namespace).results_stream)
    return info.state.messages, info.state.bytes


async def count(
    stack: Stack, path: str, requests: int
) -> tuple[Counter[str], int, int, tuple[int, int]]:
    seen: Counter[str] = Counter()
    nc = await nats.connect(stack.nats_url)

    async def on(msg: nats.aio.msg.Msg) -> None:
        seen[kind(msg.subject, stack.namespace)] += 1

    session = await Session(stack.ws_url, stack.token(0)).open()
    message, _ = PATHS[path]
    try:
        for _ in range(3):  # warm
            await session.request(message, EXPECT[path])
        await asyncio.sleep(0.5)
        sub = await nc.subscribe(">", cb=on)
        before = stack.nats_counters()["in_msgs"]
        kept = await stored(nc, stack)
        errors = 0
        for i in range(requests):
            if i % 10 == 0:
                session.new_session()
            out = await session.request(message, EXPECT[path])
            errors += out.error is not None
        await asyncio.sleep(0.5)
        await sub.unsubscribe()
        into = stack.nats_counters()["in_msgs"] - before
        now = await stored(nc, stack)
        kept = (now[0] - kept[0], now[1] - kept[1])
    finally:
        await session.close()
        await nc.close()
    return seen, errors, into, kept


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.messages", description=__doc__)
    p.add_argument("--path", default="orchestrated_1", choices=sorted(PATHS))
    p.add_argument("--requests", type=int, default=50)
    p.add_argument("--token-gap-ms", type=float, default=0.0, help="between streamed tokens")
    args = p.parse_args(argv)
    stack = Stack(max_concurrency=1024, principals=1).start()
    try:
        stack.model.configure(latency_ms=0, token_gap_ms=args.token_gap_ms)
        seen, errors, into, kept = run_loop(count(stack, args.path, args.requests))
    finally:
        stack.stop()
    n = args.requests
    print(f"{args.path}: {n} requests ({errors} errors); messages per request by subject")
    for subject, k in seen.most_common():
        print(f"  {k / n:6.2f}  {subject}")
    print(f"  {sum(seen.values()) / n:6.2f}  total")
    print(f"  {into / n:6.2f}  messages into nats-server (its in_msgs)")
    print(f"  {kept[0] / n:6.2f}  messages stored in the results stream ({kept[1] / n:.0f} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
