"""Subject, stream and bucket names. Services never spell a subject themselves.

Everything hangs under one namespace (default `sidekick`) so that several systems, or
several test runs, can share one NATS server without seeing each other.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import overload

DEFAULT_NAMESPACE = "sidekick"

# Relative subject names (commands imperative, events past tense).
CHAT_REQUESTED = "chat.requested"
REQUEST_ROUTED = "request.routed"
ORCHESTRATOR_DECIDED = "orchestrator.decided"
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


class _Name:
    """A name made from the namespace, read as an attribute of `Subjects`: a subject
    (`_Name.subject(...)`), a stream or a KV bucket."""

    def __init__(self, make: Callable[[str], str]) -> None:
        self.make = make

    @classmethod
    def subject(cls, relative: str) -> _Name:
        return cls(lambda namespace: f"{namespace}.{relative}")

    @classmethod
    def stream(cls, suffix: str) -> _Name:
        return cls(lambda namespace: f"{namespace.upper()}_{suffix}")

    @classmethod
    def bucket(cls, name: str) -> _Name:
        return cls(lambda namespace: f"{namespace}_{name}")

    @overload
    def __get__(self, subjects: None, owner: type[Subjects]) -> _Name: ...

    @overload
    def __get__(self, subjects: Subjects, owner: type[Subjects]) -> str: ...

    def __get__(self, subjects: Subjects | None, owner: type[Subjects]) -> _Name | str:
        return self if subjects is None else self.make(subjects.namespace)


class _Each:
    """A subject naming one thing (a request, a service), its template's one `{field}` filled
    by the call: `subjects.request_completed(request_id)`."""

    def __init__(self, template: str) -> None:
        self.template = template

    @overload
    def __get__(self, subjects: None, owner: type[Subjects]) -> _Each: ...

    @overload
    def __get__(self, subjects: Subjects, owner: type[Subjects]) -> Callable[[str], str]: ...

    def __get__(
        self, subjects: Subjects | None, owner: type[Subjects]
    ) -> _Each | Callable[[str], str]:
        if subjects is None:
            return self
        namespace, template = subjects.namespace, self.template
        return lambda value: f"{namespace}." + _FIELD.sub(lambda _: value, template)


_FIELD = re.compile(r"\{\w+\}")


@dataclass(frozen=True)
class Subjects:
    """Absolute names for one namespace: `Subjects("t1").chat_requested` is
    `t1.chat.requested`, `Subjects("t1").request_failed(rid)` is `t1.out.<rid>.failed`."""

    namespace: str = DEFAULT_NAMESPACE

    chat_requested = _Name.subject(CHAT_REQUESTED)
    request_routed = _Name.subject(REQUEST_ROUTED)
    orchestrator_decided = _Name.subject(ORCHESTRATOR_DECIDED)
    worker_run_all = _Name.subject(WORKER_RUN.format(kind="*"))
    worker_completed = _Name.subject(WORKER_COMPLETED)
    evaluator_run = _Name.subject(EVALUATOR_RUN)
    evaluation_completed = _Name.subject(EVALUATION_COMPLETED)
    request_completed = _Each(REQUEST_COMPLETED)
    request_failed = _Each(REQUEST_FAILED)
    request_clarification = _Each(REQUEST_CLARIFICATION)
    request_cancelled = _Each(REQUEST_CANCELLED)
    request_answered = _Name.subject(REQUEST_ANSWERED)
    # Durable for the orchestrator; every other hop also hears it on core NATS.
    request_cancel = _Name.subject(REQUEST_CANCEL)
    stream = _Each(STREAM)
    progress = _Each(PROGRESS)
    # Every client-bound event of every request.
    out_all = _Name.subject("out.>")
    deadletter = _Each(DEADLETTER)
    outbox = _Each(OUTBOX)
    outbox_all = _Name.subject("outbox.>")
    ping = _Name.subject(PING)
    pong = _Each(PONG)
    pong_all = _Name.subject(PONG.format(source="*"))

    # JetStream streams and KV buckets.
    work_stream = _Name.stream("WORK")
    results_stream = _Name.stream("RESULTS")
    deadletter_stream = _Name.stream("DEADLETTER")
    outbox_stream = _Name.stream("OUTBOX")
    requests_bucket = _Name.bucket("requests")
    sessions_bucket = _Name.bucket("sessions")
    ledger_bucket = _Name.bucket("ledger")
    # Request records (services/runtime/lifecycle.py).
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
        return [
            self.request_completed("*"),
            self.request_failed("*"),
            self.request_clarification("*"),
            self.request_cancelled("*"),
        ]


DEFAULT = Subjects()
