"""Subject, stream and bucket names. Services never spell a subject themselves.

Everything hangs under one namespace (default `sidekick`) so that several systems, or
several test runs, can share one NATS server without seeing each other.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar, overload

DEFAULT_NAMESPACE = "sidekick"
H = TypeVar("H")  # what the attribute is read on
V = TypeVar("V")

# Relative subject names (commands imperative, events past tense).
CHAT_REQUESTED = "chat.requested"
REQUEST_ROUTED = "request.routed"
WORKER_RUN = "worker.{kind}.run"
WORKER_COMPLETED = "worker.completed"
EVALUATOR_RUN = "evaluator.run"
EVALUATION_COMPLETED = "evaluation.completed"
# Everything a client may see about a request shares one prefix, so a gateway hears it on a
# single subscription, in the order it was published.
OUT = "out.{request_id}.{what}"
REQUEST_COMPLETED = "out.{request_id}.completed"
REQUEST_FAILED = "out.{request_id}.failed"
REQUEST_CLARIFICATION = "out.{request_id}.clarification"
REQUEST_CANCELLED = "out.{request_id}.cancelled"
STREAM = "out.{request_id}.chunk"
PROGRESS = "out.{request_id}.progress"
DEADLETTER = "deadletter.{source}"
# Mail the EMAIL worker could not send (no SendGrid key), kept for the user to read.
OUTBOX = "outbox.{request_id}"
REQUEST_ANSWERED = "request.answered"
REQUEST_CANCEL = "request.cancel"
# Readiness: a gateway asks, every service replica answers (contracts/health.py).
PING = "health.ping"
PONG = "health.pong.{source}"


class Derived(Generic[H, V]):
    """An attribute made from the instance it is read on, `make(instance)` at each read (on
    the class: the descriptor itself). `Subjects` makes its names so, `Buckets` and `Bus`
    (services/runtime/bus/core.py) what they hold."""

    def __init__(self, make: Callable[[H], V]) -> None:
        self.make = make

    @overload
    def __get__(self, instance: None, owner: type[H]) -> Derived[H, V]: ...

    @overload
    def __get__(self, instance: H, owner: type[H]) -> V: ...

    def __get__(self, instance: H | None, owner: type[H]) -> Derived[H, V] | V:
        return self if instance is None else self.make(instance)


class _Name:
    """The names `Subjects` holds, made from its namespace: a subject, a stream, a KV bucket,
    or a subject naming one thing (a request, a service), its template's one `{field}` filled
    by the call: `subjects.request_completed(request_id)`."""

    @staticmethod
    def subject(relative: str) -> Derived[Subjects, str]:
        return Derived(lambda s: f"{s.namespace}.{relative}")

    @staticmethod
    def stream(suffix: str) -> Derived[Subjects, str]:
        return Derived(lambda s: f"{s.namespace.upper()}_{suffix}")

    @staticmethod
    def bucket(name: str) -> Derived[Subjects, str]:
        return Derived(lambda s: f"{s.namespace}_{name}")

    @staticmethod
    def each(template: str) -> Derived[Subjects, Callable[[str], str]]:
        def fill(s: Subjects) -> Callable[[str], str]:
            return lambda value: f"{s.namespace}." + _FIELD.sub(lambda _: value, template)

        return Derived(fill)


_FIELD = re.compile(r"\{\w+\}")


@dataclass(frozen=True)
class Subjects:
    """Absolute names for one namespace: `Subjects("t1").chat_requested` is
    `t1.chat.requested`, `Subjects("t1").request_failed(rid)` is `t1.out.<rid>.failed`."""

    namespace: str = DEFAULT_NAMESPACE

    chat_requested = _Name.subject(CHAT_REQUESTED)
    request_routed = _Name.subject(REQUEST_ROUTED)
    worker_run_all = _Name.subject(WORKER_RUN.format(kind="*"))
    worker_completed = _Name.subject(WORKER_COMPLETED)
    evaluator_run = _Name.subject(EVALUATOR_RUN)
    evaluation_completed = _Name.subject(EVALUATION_COMPLETED)
    request_completed = _Name.each(REQUEST_COMPLETED)
    request_failed = _Name.each(REQUEST_FAILED)
    request_clarification = _Name.each(REQUEST_CLARIFICATION)
    request_cancelled = _Name.each(REQUEST_CANCELLED)
    request_answered = _Name.subject(REQUEST_ANSWERED)
    # Durable for the orchestrator; every other hop also hears it on core NATS.
    request_cancel = _Name.subject(REQUEST_CANCEL)
    stream = _Name.each(STREAM)
    progress = _Name.each(PROGRESS)
    # Every client-bound event of every request, and of one request.
    out_all = _Name.subject("out.>")
    out_of = _Name.each("out.{request_id}.*")
    deadletter = _Name.each(DEADLETTER)
    outbox = _Name.each(OUTBOX)
    outbox_all = _Name.subject("outbox.>")
    ping = _Name.subject(PING)
    pong = _Name.each(PONG)
    pong_all = _Name.subject(PONG.format(source="*"))

    # JetStream streams and KV buckets.
    work_stream = _Name.stream("WORK")
    results_stream = _Name.stream("RESULTS")
    deadletter_stream = _Name.stream("DEADLETTER")
    outbox_stream = _Name.stream("OUTBOX")
    requests_bucket = _Name.bucket("requests")
    sessions_bucket = _Name.bucket("sessions")
    ledger_bucket = _Name.bucket("ledger")
    # Request records (services/runtime/requests/lifecycle.py).
    status_bucket = _Name.bucket("status")
    cache_bucket = _Name.bucket("cache")

    def worker_run(self, kind: str) -> str:
        return f"{self.namespace}.{WORKER_RUN.format(kind=kind.lower())}"

    def bucket(self, name: str) -> str:
        return f"{self.namespace}_{name}"

    @property
    def work_subjects(self) -> list[str]:
        return [
            self.chat_requested,
            self.request_routed,
            self.worker_run_all,
            self.worker_completed,
            self.evaluator_run,
            self.evaluation_completed,
            self.request_answered,
            self.request_cancel,
        ]

    @property
    def result_subjects(self) -> list[str]:
        """Every client-bound event is kept, in the order published: the outcomes (published
        durably) and the chunks and progress (core NATS, stored by the server as they pass), so
        a client that lost its stream re-attaches from the last event it saw (the A2A and
        AG-UI streams, services/gateway/core/feed.py)."""
        return [self.out_all]


DEFAULT = Subjects()
