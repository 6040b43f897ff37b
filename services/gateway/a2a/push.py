"""A2A push notifications: a client names a webhook for a task (`CreateTaskPushNotificationConfig`,
0.3 `tasks/pushNotificationConfig/set`, or `configuration.taskPushNotificationConfig` of
`SendMessage`; those methods are webhooks.py), and each step and end of the task is POSTed to it.

    config time   the task is the caller's (else TaskNotFound); the URL goes through the egress
                  wall (services/runtime/walls/egress.py): an address that is not public
                  (loopback, private, link-local, ...) is refused with -32602 and the reason,
                  unless the operator allowed that host:port (SIDEKICK_EGRESS_ALLOW). Kept in
                  the `push` bucket under the task, with the principal that made it: only that
                  principal sees, lists or deletes it.
    marked        once a config is kept, the task's record is marked (`push`, by compare-and-
                  set; webhooks.py `notify`), and from then on its producers publish its steps,
                  questions and end on `<ns>.push.<task>.<what>` besides their usual subjects
                  (outcomes.py `push`, bus/progress.py): a request without a webhook costs
                  nothing here, not a message. A producer whose write lost to the mark reads
                  the record again and sees it; a task already ended when the mark came has
                  its end pushed by the gateway (the ender's dedupe key: stored once).
    outbox        the PUSH stream (a work queue) keeps those events until the gateways' durable
                  consumer `push` (topology.py, made by the bootstrap: no service may make a
                  durable consumer) has delivered them; it survives their restarts: an event
                  not yet acknowledged is delivered again. Each event's configs are read from
                  the `push` bucket, now only for notified tasks (a watch of the bucket in
                  every gateway would cost each config write a message per gateway).
    delivery      for each config of the event's task: a claim in the `pushed` bucket, made
                  with create (one per principal, config and event id, whichever gateway
                  replica holds the event), then one POST through the egress wall, no
                  redirects followed. Refused before it was sent (connection refused, a 408,
                  429 or 5xx answer): the claim is let go and the event comes back after a
                  growing delay (2 s .. 5 min, PUSH_DELIVERIES deliveries). Sent, or perhaps
                  sent (an answer that never came), or refused for good (another 4xx): the
                  claim stays, so no event is POSTed twice to one webhook.
    auth          `X-A2A-Notification-Token`: the client's token, echoed. `Authorization`: the
                  client's own `authentication` when it gave one, else `Bearer <JWT>`, signed
                  RS256 by this gateway (its key id in the header), with `iat`, `exp` (5 min),
                  `jti`, `task_id` and `request_body_sha256` (hex SHA-256 of the body, which is
                  compact JSON: `json.dumps(body, separators=(",", ":"), ensure_ascii=False)`).
                  The public keys of every gateway are at `/.well-known/jwks.json`.

What is POSTed is what a streaming client would read (1.0: a `StreamResponse`): a step is a
`statusUpdate` (WORKING, in the words of tasks.progress_text), a question or an approval a
`statusUpdate` (INPUT_REQUIRED with the questions), an end the whole `task` with its artifacts.
A config made with a 0.3 method gets 0.3's body, the task itself, each time.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import time
import uuid
from typing import Any, Literal

import httpx
import jwt
import nats.js.errors
from cryptography.hazmat.primitives.asymmetric import rsa
from nats.aio.msg import Msg
from pydantic import ValidationError

from contracts import (
    AnyEvent,
    ClarificationRequested,
    Progress,
    RequestRecord,
    parse_event,
)
from contracts.a2a import (
    PushConfigRecord,
    StreamResponse,
    TaskStatus,
)
from services.gateway.a2a import legacy
from services.gateway.a2a.tasks import Updates, asked, task_of
from services.gateway.a2a.webhooks import SOURCE, Version, Webhooks
from services.gateway.core.intake import unscoped
from services.runtime.bus.kvstore import key_for
from services.runtime.bus.topology import PUSH_DELIVERIES
from services.runtime.walls.egress import EgressRefused

log = logging.getLogger("sidekick.gateway")

POST_TIMEOUT = 10.0  # seconds per POST
JWT_LIFETIME = 300  # seconds a push's JWT is valid
KEY_REFRESH = 3600.0  # seconds between re-announcements of this gateway's public key
Result = Literal["sent", "skipped", "retry", "failed"]


class Signer:
    """This gateway's own RS256 key: made at start, never written anywhere; the public half
    is announced in the `pushkeys` bucket (kid: its thumbprint) for the JWKS endpoint."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        thumb = json.dumps({k: public[k] for k in ("e", "kty", "n")}, separators=(",", ":"))
        digest = hashlib.sha256(thumb.encode()).digest()
        self.kid = base64.urlsafe_b64encode(digest).decode().rstrip("=")
        self.jwk = {**public, "kid": self.kid, "alg": "RS256", "use": "sig"}

    def token(self, body: bytes, task_id: str) -> str:
        now = int(time.time())
        claims = {
            "iat": now,
            "exp": now + JWT_LIFETIME,
            "jti": uuid.uuid4().hex,
            "task_id": task_id,
            "request_body_sha256": hashlib.sha256(body).hexdigest(),
        }
        return jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": self.kid})


def body_of(event: AnyEvent, record: RequestRecord, version: Version) -> dict[str, Any]:
    """What one event of the task is, POSTed (see the module's docstring)."""
    context = unscoped(record.principal, record.session_id)
    ids = (record.request_id, context)
    if version == "0.3":
        task = task_of(record)
        if isinstance(event, ClarificationRequested):  # as asked, whatever happened since
            status = TaskStatus(
                state="TASK_STATE_INPUT_REQUIRED",
                message=asked(ids, event),
                timestamp=event.ts.isoformat(),
            )
            task = task.model_copy(update={"status": status})
        return legacy.task(task.wire())
    if isinstance(event, Progress | ClarificationRequested):
        (update,) = Updates(*ids).take(event)
        return update.wire()
    return StreamResponse(task=task_of(record)).wire()


def compact(body: dict[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


class Pusher:
    """The outbox's reader: each step or end of a task with webhooks, POSTed to each once."""

    def __init__(self, webhooks: Webhooks, signer: Signer) -> None:
        self.webhooks = webhooks
        self.bus = webhooks.bus
        self.intake = webhooks.intake
        self.signer = signer
        self.http = webhooks.egress.http_client(
            source=SOURCE, timeout=POST_TIMEOUT, follow_redirects=False
        )
        self._refresh: asyncio.Task[None] | None = None

    def register(self) -> None:
        self.bus.pushes("push", self.deliver)

    async def start(self) -> None:
        if self.webhooks.enabled:
            await self._announce()
            self._refresh = asyncio.create_task(self._keep_announcing(), name="push-key")

    async def stop(self) -> None:
        if self._refresh is not None:
            self._refresh.cancel()
        await self.http.aclose()

    async def _announce(self) -> None:
        await self.bus.kv.get("pushkeys").put(self.signer.kid, json.dumps(self.signer.jwk).encode())

    async def _keep_announcing(self) -> None:
        while True:
            await asyncio.sleep(KEY_REFRESH)
            try:
                await self._announce()
            except Exception as exc:  # the bucket keeps the last one for two days
                log.warning("could not announce the push-notification key: %r", exc)

    async def jwks(self) -> dict[str, Any]:
        """Every gateway's public key that is still announced."""
        kv = self.bus.kv.get("pushkeys")
        try:
            kids = await kv.keys()
        except nats.js.errors.NoKeysError:
            kids = []
        keys = []
        for kid in kids:
            try:
                entry = await kv.get(kid)
            except nats.js.errors.KeyNotFoundError:
                continue
            if entry.value:
                keys.append(json.loads(entry.value))
        return {"keys": keys}

    async def deliver(self, msg: Msg) -> None:
        """One event of the outbox: acked once every webhook of its task had it (or will
        never have it), else asked again after a delay."""
        if not self.webhooks.enabled:
            await msg.ack()
            return
        try:
            event = parse_event(msg.data)
        except (ValidationError, ValueError):
            await msg.term()  # the bus's own wall refuses such events; nothing to notify
            return
        if isinstance(event, Progress) and event.stage == "accepted":
            await msg.ack()
            return
        try:
            results = await self._push(event)
        except Exception as exc:  # the bus or the store: the event comes back
            log.warning("push notifications of %s wait: %r", event.request_id, exc)
            results = ["retry"]
        delivered = msg.metadata.num_delivered
        if "retry" in results:
            if delivered < PUSH_DELIVERIES:
                await msg.nak(delay=min(2.0**delivered, 300.0))
                return
            log.warning(
                "gave up on a push notification of %s after %d tries", event.request_id, delivered
            )
        await msg.ack()

    async def _push(self, event: AnyEvent) -> list[Result]:
        configs = await self.webhooks.of_task(event.request_id)
        if not configs:
            return []
        record = await self.intake.record(event.request_id)
        if record is None:
            return []
        return list(
            await asyncio.gather(
                *(self._one(event, record, c) for c in configs if c.principal == record.principal)
            )
        )

    async def _one(self, event: AnyEvent, record: RequestRecord, push: PushConfigRecord) -> Result:
        config = push.config
        claims = self.bus.kv.get("pushed")
        claim = key_for(f"{push.principal}\n{config.task_id}\n{config.id}\n{event.event_id}")
        try:
            await claims.create(claim, b"sending")
        except nats.js.errors.KeyWrongLastSequenceError:
            return "skipped"  # sent, or being sent, or perhaps sent: never twice
        body = compact(body_of(event, record, push.version))
        # The event's id lets a receiver drop a copy (none is sent twice; a second webhook
        # config of the same URL would be a second receiver).
        headers = {"content-type": "application/json", "x-sidekick-event-id": event.event_id}
        if config.token:
            headers["x-a2a-notification-token"] = config.token
        auth = config.authentication
        if auth is not None and auth.credentials:
            headers["authorization"] = f"{auth.scheme} {auth.credentials}"
        else:
            headers["authorization"] = f"Bearer {self.signer.token(body, config.task_id)}"
        where = config.url[:200]
        try:
            answer = await self.http.post(config.url, content=body, headers=headers)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            await claims.delete(claim)  # never sent: it may go again
            log.warning("push to %s not sent (%r); it is tried again", where, exc)
            return "retry"
        except EgressRefused as exc:
            await claims.put(claim, b"refused")
            log.warning("push to %s refused: %s", where, exc.reason)
            return "failed"
        except httpx.HTTPError as exc:  # sent, but no answer: perhaps delivered, so not again
            await claims.put(claim, b"unknown")
            log.warning("push to %s got no answer (%r); not sent again", where, exc)
            return "failed"
        if answer.is_success:
            await claims.put(claim, b"sent")
            return "sent"
        if answer.status_code in (408, 429) or answer.status_code >= 500:
            await claims.delete(claim)
            log.warning("push to %s answered %d; it is tried again", where, answer.status_code)
            return "retry"
        await claims.put(claim, b"refused")
        log.warning("push to %s answered %d; not sent again", where, answer.status_code)
        return "failed"
