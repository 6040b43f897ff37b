"""Subject, stream and bucket names. Services never spell a subject themselves.

Everything hangs under one namespace (default `sidekick`) so that several systems, or
several test runs, can share one NATS server without seeing each other.
"""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class Subjects:
    """Absolute names for one namespace."""

    namespace: str = DEFAULT_NAMESPACE

    def _abs(self, name: str) -> str:
        return f"{self.namespace}.{name}"

    @property
    def chat_requested(self) -> str:
        return self._abs(CHAT_REQUESTED)

    @property
    def request_routed(self) -> str:
        return self._abs(REQUEST_ROUTED)

    @property
    def orchestrator_decided(self) -> str:
        return self._abs(ORCHESTRATOR_DECIDED)

    def worker_run(self, kind: str) -> str:
        return self._abs(WORKER_RUN.format(kind=kind.lower()))

    @property
    def worker_run_all(self) -> str:
        return self._abs(WORKER_RUN.format(kind="*"))

    @property
    def worker_completed(self) -> str:
        return self._abs(WORKER_COMPLETED)

    @property
    def evaluator_run(self) -> str:
        return self._abs(EVALUATOR_RUN)

    @property
    def evaluation_completed(self) -> str:
        return self._abs(EVALUATION_COMPLETED)

    def request_completed(self, request_id: str) -> str:
        return self._abs(REQUEST_COMPLETED.format(request_id=request_id))

    def request_failed(self, request_id: str) -> str:
        return self._abs(REQUEST_FAILED.format(request_id=request_id))

    def request_clarification(self, request_id: str) -> str:
        return self._abs(REQUEST_CLARIFICATION.format(request_id=request_id))

    def request_cancelled(self, request_id: str) -> str:
        return self._abs(REQUEST_CANCELLED.format(request_id=request_id))

    @property
    def request_answered(self) -> str:
        return self._abs(REQUEST_ANSWERED)

    @property
    def request_cancel(self) -> str:
        """Durable for the orchestrator; every other hop also hears it on core NATS."""
        return self._abs(REQUEST_CANCEL)

    def stream(self, request_id: str) -> str:
        return self._abs(STREAM.format(request_id=request_id))

    def progress(self, request_id: str) -> str:
        return self._abs(PROGRESS.format(request_id=request_id))

    @property
    def out_all(self) -> str:
        """Every client-bound event of every request."""
        return self._abs("out.>")

    def deadletter(self, source: str) -> str:
        return self._abs(DEADLETTER.format(source=source))

    def outbox(self, request_id: str) -> str:
        return self._abs(OUTBOX.format(request_id=request_id))

    @property
    def outbox_all(self) -> str:
        return self._abs("outbox.>")

    @property
    def ping(self) -> str:
        return self._abs(PING)

    def pong(self, service: str) -> str:
        return self._abs(PONG.format(source=service))

    @property
    def pong_all(self) -> str:
        return self._abs(PONG.format(source="*"))

    # JetStream streams and KV buckets.
    @property
    def work_stream(self) -> str:
        return f"{self.namespace.upper()}_WORK"

    @property
    def results_stream(self) -> str:
        return f"{self.namespace.upper()}_RESULTS"

    @property
    def deadletter_stream(self) -> str:
        return f"{self.namespace.upper()}_DEADLETTER"

    @property
    def outbox_stream(self) -> str:
        return f"{self.namespace.upper()}_OUTBOX"

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

    def bucket(self, name: str) -> str:
        return f"{self.namespace}_{name}"

    @property
    def requests_bucket(self) -> str:
        return self.bucket("requests")

    @property
    def sessions_bucket(self) -> str:
        return self.bucket("sessions")

    @property
    def ledger_bucket(self) -> str:
        return self.bucket("ledger")

    @property
    def status_bucket(self) -> str:
        """Request records (services/runtime/lifecycle.py)."""
        return self.bucket("status")

    @property
    def cache_bucket(self) -> str:
        return self.bucket("cache")


DEFAULT = Subjects()
