"""Is the system ready? The gateway asks every service over the bus (`Ping`, core NATS, heard by
every replica), each answers with what it is subscribed to (`Pong`), and `/readyz` reports the
result (`Readiness`): ready only when every service is up and bound to the bus."""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, Field

from contracts.base import Model, new_id, utcnow

Service = Literal["gateway", "frontline", "orchestrator", "evaluator", "workers"]


class Ping(Model):
    """A gateway asks every service replica to say it is there."""

    kind: Literal["health.ping"] = "health.ping"
    ping_id: str = Field(default_factory=new_id, description="Echoed by every answer.")
    ts: AwareDatetime = Field(default_factory=utcnow, description="When it was sent.")


class Pong(Model):
    """One service replica's answer to a ping."""

    kind: Literal["health.pong"] = "health.pong"
    ping_id: str = Field(description="The ping answered.")
    service: Service = Field(description="Which service answered.")
    instance: str = Field(description="Which replica: host name and process id.")
    ready: bool = Field(description="Its start-up finished: subscribed, hooks run.")
    subjects: list[str] = Field(description="The subjects its subscribers and consumers take.")
    metrics_url: str | None = Field(
        default=None, description="Where this replica serves /metrics, when it listens."
    )
    ts: AwareDatetime = Field(default_factory=utcnow, description="When it answered.")


class ServiceHealth(Model):
    """What `/readyz` says of one service."""

    ready: bool = Field(description="At least one replica answered and is ready.")
    replicas: int = Field(ge=0, description="Replicas that answered this round.")
    metrics_urls: list[str] = Field(default_factory=list, description="Their /metrics.")


class Readiness(Model):
    """The body of `GET /readyz` on the gateway."""

    ready: bool = Field(description="Every service answered over the bus and is subscribed.")
    service: Literal["gateway"] = Field(default="gateway", description="Who answers.")
    nats: Literal["connected", "down"] = Field(description="The gateway's own NATS connection.")
    services: dict[str, ServiceHealth] = Field(
        default_factory=dict, description="Each service other than the gateway, by name."
    )
    waiting_for: list[str] = Field(
        default_factory=list,
        description="Services that did not answer, and subjects nobody has subscribed to yet.",
    )
