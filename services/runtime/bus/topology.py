"""The bus's topology in one place: its streams, KV buckets and durable consumers, and what each
role uses of them. Two things are made from this table:

- `bootstrap()` (run with admin rights by `sidekick up`, `sidekick bootstrap` or the Kubernetes
  Job) creates every stream, bucket and consumer, idempotently;
- the NATS permissions of each service's user (natsauth.py), which name exactly the JetStream API
  subjects of its own consumers and buckets, so no service can create, update, delete or purge
  anything, nor read what its role does not need.

A service only binds to what exists (`bind()`), waiting, with one log line, while the bootstrap
step has not run yet.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

import nats.errors
import nats.js.errors
from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    KeyValueConfig,
    RePublish,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)
from nats.js.kv import KeyValue

from contracts import Subjects
from services.runtime.base.errors import SidekickError
from services.runtime.base.settings import Settings

log = logging.getLogger("sidekick.topology")

DAY = 24 * 3600
SERVICES = ("gateway", "frontline", "orchestrator", "evaluator", "workers")
WORKER_KINDS = ("general", "search", "research", "email", "tools")
# KV buckets and how long an entry lives (seconds).
BUCKETS: dict[str, float] = {
    "sessions": 30 * DAY,
    "ledger": 30 * DAY,
    "approvals": 30 * DAY,
    "budgets": 3 * DAY,
    "status": 30 * DAY,
    "cache": 30 * DAY,
    "index": 30 * DAY,
    "parked": 0,
    "preferences": 0,
    # What processes learned about each model endpoint (llm/modes.py): a day, then learned anew.
    "endpoints": DAY,
    # A2A push notifications (services/gateway/a2a/push.py): each task's webhook configs, each
    # delivery's claim (one per event and config: at most one POST), and the public keys the
    # gateways sign them with (served at /.well-known/jwks.json).
    "push": 30 * DAY,
    "pushed": 7 * DAY,
    "pushkeys": 2 * DAY,
}


@dataclass(frozen=True)
class Role:
    """What one service uses of the bus. `publish` and `subscribe` are core subjects (relative
    names are put under the namespace by `Subjects`); buckets and consumers are by name."""

    consumers: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()  # buckets it reads (get)
    writes: tuple[str, ...] = ()  # buckets it writes (put, create, update, delete a key)
    watches: tuple[str, ...] = ()  # buckets it follows with a watcher (an ephemeral consumer)
    publish: tuple[str, ...] = ()
    subscribe: tuple[str, ...] = ()
    # Its durable consumers of the PUSH stream (push_consumers below).
    push_consumers: tuple[str, ...] = field(default=())
    reads_streams: tuple[str, ...] = field(default=())  # streams it reads messages of by sequence
    # Streams it follows with ordered ephemeral consumers (the gateway's re-attachable streams).
    follows_streams: tuple[str, ...] = field(default=())

    def durables(self, s: Subjects) -> list[tuple[str, str]]:
        """Each of its durable consumers as (stream, durable name): the WORK stream's, then the
        PUSH stream's."""
        return [
            (stream, durable_name(s, consumer))
            for stream, names in (
                (s.work_stream, self.consumers),
                (s.push_stream, self.push_consumers),
            )
            for consumer in names
        ]


def consumers(s: Subjects) -> dict[str, str]:
    """Every durable consumer of the WORK stream (its name without the namespace) and the
    subject it takes."""
    table = {
        "frontline": s.chat_requested,
        "orchestrator_routed": s.request_routed,
        "orchestrator_results": s.worker_completed,
        "orchestrator_verdicts": s.evaluation_completed,
        "orchestrator_answers": s.request_answered,
        "orchestrator_cancels": s.request_cancel,
        "evaluator": s.evaluator_run,
    }
    for kind in WORKER_KINDS:
        table[f"worker_{kind}"] = s.worker_run(kind)
    return table


# Every bucket the orchestrator reads, and it writes each one it reads.
ORCHESTRATOR_BUCKETS = (
    "sessions",
    "status",
    "ledger",
    "cache",
    "parked",
    "approvals",
    "budgets",
    "endpoints",
)


def push_consumers(s: Subjects) -> dict[str, list[str]]:
    """Every durable consumer of the PUSH stream and the subjects it takes: `push`, the A2A
    push notifications' outbox, read by the gateways. Only a request a client asked to be
    notified of is published there (its record's `push`), so a request without a webhook costs
    the outbox nothing (services/gateway/a2a/push.py)."""
    return {"push": [s.push_all]}


def roles(s: Subjects) -> dict[str, Role]:
    ends = ("completed", "failed", "cancelled")
    outcomes = tuple(s.out_any(what) for what in ends)
    return {
        "gateway": Role(
            # parked: the approvals waiting now (an operator's queue, /api/approvals).
            # push, pushed, pushkeys: A2A push notifications (configs, deliveries, keys).
            reads=(
                "sessions",
                "status",
                "index",
                "preferences",
                "approvals",
                "budgets",
                "parked",
                "push",
                "pushed",
                "pushkeys",
            ),
            writes=(
                "sessions",
                "status",
                "index",
                "preferences",
                "approvals",
                "push",
                "pushed",
                "pushkeys",
            ),
            watches=("index", "parked", "pushkeys"),
            push_consumers=("push",),
            # push.*.<end>: the end of a task that had ended when its first webhook was kept.
            publish=(
                s.chat_requested,
                s.request_answered,
                s.request_cancel,
                s.ping,
                *(s.push_any(w) for w in ends),
            ),
            subscribe=(s.out_all, s.pong_all),
            reads_streams=(s.outbox_stream, s.results_stream),
            follows_streams=(s.results_stream,),
        ),
        "frontline": Role(
            consumers=("frontline",),
            # budgets: a direct answer's call is held against its day and session, and counted.
            reads=("sessions", "status", "ledger", "budgets", "endpoints"),
            writes=("sessions", "status", "ledger", "budgets", "endpoints"),
            # chat.requested: the session's next request, when this one's end starts it.
            publish=(
                s.chat_requested,
                s.request_routed,
                s.out_any("chunk"),
                s.out_any("text"),
                s.out_any("progress"),
                *outcomes,
                *(s.push_any(w) for w in ("progress", *ends)),
                s.pong("frontline"),
            ),
            subscribe=(s.request_cancel, s.ping),
        ),
        "orchestrator": Role(
            consumers=tuple(c for c in consumers(s) if c.startswith("orchestrator_")),
            reads=ORCHESTRATOR_BUCKETS,
            writes=ORCHESTRATOR_BUCKETS,
            watches=("cache", "parked"),
            publish=(
                s.chat_requested,
                s.worker_run_all,
                s.evaluator_run,
                s.out_any("progress"),
                s.out_any("clarification"),
                *outcomes,
                *(s.push_any(w) for w in ("progress", "clarification", *ends)),
                s.pong("orchestrator"),
            ),
            # The server's advisory when a message ran out of deliveries, and that message.
            subscribe=(f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{s.work_stream}.*", s.ping),
            reads_streams=(s.work_stream,),
        ),
        "evaluator": Role(
            consumers=("evaluator",),
            reads=("endpoints",),
            writes=("endpoints",),
            publish=(s.evaluation_completed, s.pong("evaluator")),
            subscribe=(s.ping,),
        ),
        "workers": Role(
            consumers=tuple(f"worker_{kind}" for kind in WORKER_KINDS),
            reads=("ledger", "approvals", "endpoints"),
            writes=("ledger", "endpoints"),
            publish=(
                s.worker_completed,
                s.out_any("progress"),
                s.out_any("step"),
                s.push_any("progress"),
                s.outbox_all,
                s.pong("workers"),
            ),
            subscribe=(s.request_cancel, s.ping),
        ),
    }


def durable_name(s: Subjects, consumer: str) -> str:
    return f"{s.namespace}_{consumer}"


def stream_configs(s: Subjects) -> list[StreamConfig]:
    """Every stream, on file: (name, subjects, days kept, duplicates dropped for ten minutes).
    The push notifications' outbox is a work queue: an event leaves it once delivered (or given
    up on); the others keep theirs for their days."""
    table: list[tuple[str, list[str], int, bool]] = [
        (s.work_stream, s.work_subjects, 1, True),
        (s.results_stream, s.result_subjects, 7, True),
        (s.deadletter_stream, [s.deadletter("*")], 30, False),
        (s.outbox_stream, [s.outbox_all], 30, True),
        (s.push_stream, [s.push_all], 7, True),
    ]
    return [
        StreamConfig(
            name=name,
            subjects=subjects,
            retention=RetentionPolicy.WORK_QUEUE
            if name == s.push_stream
            else RetentionPolicy.LIMITS,
            storage=StorageType.FILE,
            max_age=days * DAY,
            duplicate_window=10 * 60 if deduplicated else 0,
        )
        for name, subjects, days, deduplicated in table
    ]


PUSH_DELIVERIES = 12  # deliveries of one event to the push outbox (its webhooks' retries)


def consumer_config(
    s: Subjects, consumer: str, settings: Settings, *, push: bool = False
) -> ConsumerConfig:
    """A durable consumer of the work stream (one subject, `max_deliver` deliveries), or with
    `push` of the push outbox (its subjects, PUSH_DELIVERIES deliveries)."""
    name = durable_name(s, consumer)
    return ConsumerConfig(
        name=name,
        durable_name=name,
        filter_subject=None if push else consumers(s)[consumer],
        filter_subjects=push_consumers(s)[consumer] if push else None,
        ack_policy=AckPolicy.EXPLICIT,
        ack_wait=settings.ack_wait,
        max_deliver=PUSH_DELIVERIES if push else settings.max_deliver,
        max_ack_pending=settings.max_concurrency * 4,
        deliver_policy=DeliverPolicy.ALL,
    )


async def bootstrap(js: JetStreamContext, settings: Settings) -> None:
    """Create (or bring up to date) every stream, bucket and durable consumer. Needs rights no
    service has: run it as the admin user."""
    s = Subjects(settings.namespace)
    replicas = settings.stream_replicas
    for config in stream_configs(s):
        config.num_replicas = replicas
        try:
            await js.add_stream(config)
        except nats.js.errors.BadRequestError:
            await js.update_stream(config)
    for name, ttl in BUCKETS.items():
        republish = republished(s, name)
        try:
            await js.key_value(s.bucket(name))
        except nats.js.errors.BucketNotFoundError:
            await js.create_key_value(
                KeyValueConfig(
                    bucket=s.bucket(name),
                    history=1,
                    ttl=ttl,
                    storage=StorageType.FILE,
                    replicas=replicas,
                    republish=republish,
                )
            )
        else:
            await _republish(js, f"KV_{s.bucket(name)}", republish)
    for consumer in consumers(s):
        await js.add_consumer(s.work_stream, consumer_config(s, consumer, settings))
    for consumer in push_consumers(s):
        await js.add_consumer(s.push_stream, consumer_config(s, consumer, settings, push=True))
    log.info("bus topology of namespace %s is in place", settings.namespace)


def republished(s: Subjects, bucket: str) -> RePublish | None:
    """Where the server republishes each write of a bucket: the `sessions` bucket's to the
    session's own `out` subject, so the gateways holding a session keep its record current
    without reading it (services/gateway/core/outbound.py)."""
    if bucket != "sessions":
        return None
    return RePublish(src=f"$KV.{s.bucket(bucket)}.*", dest=s.session_republish)


async def _republish(js: JetStreamContext, stream: str, republish: RePublish | None) -> None:
    """Bring a bucket made before its republishing up to date."""
    config = (await js.stream_info(stream)).config
    have = (config.republish.src, config.republish.dest) if config.republish else None
    want = (republish.src, republish.dest) if republish else None
    if have == want:
        return
    config.republish = republish
    await js.update_stream(config)


class TopologyMissing(SidekickError, RuntimeError):
    """The bootstrap step has not run (or not for this namespace)."""


async def bind(
    js: JetStreamContext, settings: Settings, service: str, *, wait: float | None = None
) -> dict[str, KeyValue]:
    """The role's buckets, once the bootstrap step has made them and its consumers. Waits (one
    log line) up to `wait` seconds, forever when None."""
    s = Subjects(settings.namespace)
    role = roles(s)[service]
    names = sorted({*role.reads, *role.writes, *role.watches})
    loop = asyncio.get_running_loop()
    deadline = None if wait is None else loop.time() + wait
    said = False
    while True:
        try:
            buckets = {name: await js.key_value(s.bucket(name)) for name in names}
            for stream, durable in role.durables(s):
                await js.consumer_info(stream, durable)
            if said:
                log.info("the bus topology is in place; going on")
            return buckets
        except (nats.js.errors.NotFoundError, nats.errors.TimeoutError) as exc:
            missing = exc
        if deadline is not None and loop.time() > deadline:
            raise TopologyMissing(
                f"the streams, buckets or consumers of namespace {settings.namespace} do not "
                f"exist ({missing!r}): run `sidekick bootstrap` with the admin user"
            )
        if not said:
            log.warning(
                "waiting for the bus topology of namespace %s (streams, buckets, consumers): "
                "it is made by `sidekick bootstrap` (sidekick up runs it)",
                settings.namespace,
            )
            said = True
        await asyncio.sleep(1.0)
