"""Subject, stream and bucket names. Services never spell a subject themselves.

Everything hangs under one namespace (default `sidekick`) so that several systems, or
several test runs, can share one NATS server without seeing each other.
"""

from __future__ import annotations

import hashlib
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
# Everything a client may see about a request shares one prefix per session ({session}: the
# session's key, `session_key`), so a gateway hears the sessions it holds, and only those, on
# one subscription each, in the order it was published.
OUT = "out.{session}.{request_id}.{what}"
REQUEST_COMPLETED = "out.{session}.{request_id}.completed"
REQUEST_FAILED = "out.{session}.{request_id}.failed"
REQUEST_CLARIFICATION = "out.{session}.{request_id}.clarification"
REQUEST_CANCELLED = "out.{session}.{request_id}.cancelled"
# A reply's tokens as they come, for the clients listening now (not stored) ...
STREAM = "out.{session}.{request_id}.chunk"
# ... and the same text stored coalesced, for a client that re-attaches (never heard live).
STORED_TEXT = "out.{session}.{request_id}.text"
PROGRESS = "out.{session}.{request_id}.progress"
# A worker's pipeline step (progress with a workflow status): heard by the session's gateways,
# and by one gateway of all, which writes it into the request's record.
STEP = "out.{session}.{request_id}.step"
# Every write of the session's record, republished by the server from the `sessions` bucket
# (its revision in the `Nats-Sequence` header): the gateways holding the session keep a copy.
SESSION = "out.{session}.session"
# What the results stream keeps of a request: its ends, progress, steps and stored text.
KEPT = ("completed", "failed", "clarification", "cancelled", "progress", "step", "text")
# A2A push notifications' outbox (services/gateway/a2a/push.py): a request's steps, questions
# and end, published here too, and only, when a client asked to be notified of it (its record's
# `push`); the PUSH stream keeps them until the gateways' `push` consumer has delivered them.
PUSH = "push.{request_id}.{what}"
PUSHED = ("progress", "clarification", "completed", "failed", "cancelled")
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
NO_SESSION = "_"  # the session token of a subject named without its session (tests, tools)


def key_token(value: str) -> str:
    """A subject- and KV-safe token for any string (ids come from clients and may hold any
    character): a hash."""
    return hashlib.sha256(value.encode()).hexdigest()[:40]


def session_key(session_id: str) -> str:
    """The session's token in subjects, which is also its key in the `sessions` bucket."""
    return key_token(session_id)


def _out(what: str) -> Derived[Subjects, Callable[..., str]]:
    """`subjects.<name>(request_id, session_id)`: one request's client-bound subject."""

    def make(s: Subjects) -> Callable[..., str]:
        def subject(request_id: str, session_id: str | None = None) -> str:
            token = session_key(session_id) if session_id is not None else NO_SESSION
            return f"{s.namespace}.out.{token}.{request_id}.{what}"

        return subject

    return Derived(make)


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
    request_completed = _out("completed")
    request_failed = _out("failed")
    request_clarification = _out("clarification")
    request_cancelled = _out("cancelled")
    request_answered = _Name.subject(REQUEST_ANSWERED)
    # Durable for the orchestrator; every other hop also hears it on core NATS.
    request_cancel = _Name.subject(REQUEST_CANCEL)
    stream = _out("chunk")
    stored_text = _out("text")
    progress = _out("progress")
    step = _out("step")
    # Every client-bound event of every request, of one request, and every step.
    out_all = _Name.subject("out.>")
    out_of = _Name.each("out.*.{request_id}.*")
    steps_all = _Name.subject("out.*.*.step")
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
    push_stream = _Name.stream("PUSH")
    push_all = _Name.subject("push.>")
    # The orchestrator's loop states' bucket before they moved into the request records: no
    # role may use it (tests/test_nats_security.py checks that nobody can).
    requests_bucket = _Name.bucket("requests")
    sessions_bucket = _Name.bucket("sessions")
    ledger_bucket = _Name.bucket("ledger")
    # Request records (services/runtime/requests/lifecycle.py).
    status_bucket = _Name.bucket("status")
    cache_bucket = _Name.bucket("cache")

    def out_any(self, what: str) -> str:
        """The pattern of one kind of client-bound subject of every request (permissions)."""
        return f"{self.namespace}.out.*.*.{what}"

    def out_session(self, session_id: str) -> str:
        """Everything client-bound of one session's requests, and its record's writes."""
        return f"{self.namespace}.out.{session_key(session_id)}.>"

    def push(self, request_id: str, what: str) -> str:
        """One request's push-notification subject: `what` is one of `PUSHED`."""
        return f"{self.namespace}.push.{request_id}.{what}"

    def push_any(self, what: str) -> str:
        """The pattern of one kind of push-notification subject of every request."""
        return f"{self.namespace}.push.*.{what}"

    @property
    def session_republish(self) -> str:
        """Where the server republishes each write of the `sessions` bucket (a transform of
        `$KV.<bucket>.<key>`): the session's own `out` subject."""
        return f"{self.namespace}.out.{{{{wildcard(1)}}}}.session"

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
        """What is kept of every client-bound event, in the order published: the outcomes
        (published durably), the progress and steps (core NATS, stored by the server as they
        pass) and a reply's text coalesced (`text`; the live `chunk`s are not kept), so a
        client that lost its stream re-attaches from the last event it saw (the A2A and AG-UI
        streams, services/gateway/core/feed.py)."""
        return [f"{self.namespace}.out.*.*.{what}" for what in KEPT]


DEFAULT = Subjects()
