"""The bus as a table: every subject, the message it carries, how it travels, and which services
publish and consume it. The AsyncAPI document (`contracts/schemas/asyncapi.json`) is generated
from this table, and a test checks the table against the services' real subscriptions and
their NATS permissions, so it cannot drift from the code."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

from contracts import base, events
from contracts import subjects as names
from contracts.email import OutboxEntry
from contracts.health import Ping, Pong
from contracts.state import SessionRecord

Service = Literal["gateway", "frontline", "orchestrator", "evaluator", "workers"]
Transport = Literal["work", "results", "core", "deadletter", "outbox", "push"]


@dataclass(frozen=True)
class Channel:
    subject: str  # relative to the namespace; {placeholders} are one subject token each
    message: type[BaseModel]
    transport: Transport  # a JetStream stream (work, results, ...) or core NATS
    producers: tuple[Service, ...]
    consumers: tuple[Service, ...]
    description: str


CLIENT_BOUND: tuple[Service, ...] = ("gateway",)
BEHIND_GATEWAY: tuple[Service, ...] = ("frontline", "orchestrator", "evaluator", "workers")
ENDERS: tuple[Service, ...] = ("frontline", "orchestrator")

CHANNELS: tuple[Channel, ...] = (
    Channel(
        names.CHAT_REQUESTED,
        events.ChatRequested,
        "work",
        ("gateway", "frontline", "orchestrator"),
        ("frontline",),
        "A user's message, accepted and acknowledged by a gateway; sent on by a gateway when "
        "its session is free, or by whoever ended the request before it in its session.",
    ),
    Channel(
        names.REQUEST_ROUTED,
        events.RequestRouted,
        "work",
        ("frontline",),
        ("orchestrator",),
        "The frontline decided the request needs the orchestrator.",
    ),
    Channel(
        names.WORKER_RUN,
        events.WorkerTask,
        "work",
        ("orchestrator",),
        ("workers",),
        "One attempt's work for one worker kind ({kind}: general, search, ...).",
    ),
    Channel(
        names.WORKER_COMPLETED,
        events.WorkerResult,
        "work",
        ("workers",),
        ("orchestrator",),
        "What a worker produced for one attempt.",
    ),
    Channel(
        names.EVALUATOR_RUN,
        events.EvaluationRequested,
        "work",
        ("orchestrator",),
        ("evaluator",),
        "Judge one attempt's output against the success criteria.",
    ),
    Channel(
        names.EVALUATION_COMPLETED,
        events.VerdictIssued,
        "work",
        ("evaluator",),
        ("orchestrator",),
        "The evaluator's verdict on one attempt.",
    ),
    Channel(
        names.REQUEST_ANSWERED,
        events.ClarificationAnswered,
        "work",
        ("gateway",),
        ("orchestrator",),
        "The user's answers to a parked request.",
    ),
    Channel(
        names.REQUEST_CANCEL,
        events.CancelRequested,
        "work",
        ("gateway",),
        ("orchestrator", "frontline", "workers"),
        "Stop this request at every hop (durable for the orchestrator, heard by all).",
    ),
    Channel(
        names.STREAM,
        events.StreamChunk,
        "core",
        ("frontline",),
        CLIENT_BOUND,
        "A piece of a directly answered request, as the model streams it, for the clients "
        "listening now ({session}: the session's key; not stored).",
    ),
    Channel(
        names.STORED_TEXT,
        events.StreamChunk,
        "core",
        ("frontline",),
        CLIENT_BOUND,
        "The same text coalesced (a sentence, or a few hundred characters, a chunk), kept by "
        "the results stream as it passes for clients that re-attach; live gateways skip it.",
    ),
    Channel(
        names.PROGRESS,
        events.Progress,
        "core",
        ("frontline", "orchestrator", "workers"),
        CLIENT_BOUND,
        "A step of the request's way, for clients in events mode (core NATS, kept as it passes).",
    ),
    Channel(
        names.STEP,
        events.Progress,
        "core",
        ("workers",),
        CLIENT_BOUND,
        "A worker's pipeline step (its workflow status): heard by the session's gateways and "
        "by one gateway of all (a queue group), which writes it into the request's record.",
    ),
    Channel(
        names.SESSION,
        SessionRecord,
        "core",
        (),
        CLIENT_BOUND,
        "Each write of the session's record, republished by nats-server from the `sessions` "
        "bucket (revision in `Nats-Sequence`): the gateways holding the session keep a copy.",
    ),
    Channel(
        names.REQUEST_COMPLETED,
        events.RequestCompleted,
        "results",
        ENDERS,
        CLIENT_BOUND,
        "The request's answer.",
    ),
    Channel(
        names.REQUEST_FAILED,
        events.RequestFailed,
        "results",
        ENDERS,
        CLIENT_BOUND,
        "The request ended without an answer, and why.",
    ),
    Channel(
        names.REQUEST_CLARIFICATION,
        events.ClarificationRequested,
        "results",
        ("orchestrator",),
        CLIENT_BOUND,
        "The request waits for the user's answers to these questions.",
    ),
    Channel(
        names.REQUEST_CANCELLED,
        events.RequestCancelled,
        "results",
        ENDERS,
        CLIENT_BOUND,
        "The request ended because it was cancelled.",
    ),
    Channel(
        names.PUSH.replace("{what}", "progress"),
        events.Progress,
        "push",
        ("frontline", "orchestrator", "workers"),
        CLIENT_BOUND,
        "A step of a request a client is notified of (A2A push notifications: its record's "
        "`push`), for the gateways' `push` consumer, which POSTs it to the task's webhooks.",
    ),
    Channel(
        names.PUSH.replace("{what}", "clarification"),
        events.ClarificationRequested,
        "push",
        ("orchestrator",),
        CLIENT_BOUND,
        "The questions of a request a client is notified of, for its webhooks.",
    ),
    *(
        Channel(
            names.PUSH.replace("{what}", what),
            message,
            "push",
            # The gateway: the end of a task that had ended when its first webhook was kept.
            ("gateway", *ENDERS),
            CLIENT_BOUND,
            f"The end ({what}) of a request a client is notified of, for its webhooks.",
        )
        for what, message in (
            ("completed", events.RequestCompleted),
            ("failed", events.RequestFailed),
            ("cancelled", events.RequestCancelled),
        )
    ),
    Channel(
        names.OUTBOX,
        OutboxEntry,
        "outbox",
        ("workers",),
        (),
        "Mail kept unsent (no SendGrid key); read from the stream by the gateway and CLI.",
    ),
    Channel(
        names.PING,
        Ping,
        "core",
        ("gateway",),
        BEHIND_GATEWAY,
        "Readiness: a gateway asks every replica of every service to answer (GET /readyz).",
    ),
    Channel(
        names.PONG,
        Pong,
        "core",
        BEHIND_GATEWAY,
        ("gateway",),
        "One replica's answer to a ping ({source}: its service): ready, and what it takes.",
    ),
    Channel(
        names.DEADLETTER,
        base.DeadLetter,
        "deadletter",
        ("frontline", "orchestrator", "evaluator", "workers"),
        (),
        "A message that could not be processed ({source}: the service that gave up).",
    ),
)
