"""A2A push notifications' configs: the methods that make, read, list and delete a task's
webhooks (1.0 and 0.3 shapes), each checked through the egress wall when it is given, kept in
the `push` bucket under its task with the principal that made it, and then the task's record
marked (`push`), so its producers publish its updates for the outbox from then on; a task
that had already ended gets its end pushed from here (push.py tells the rest)."""

from __future__ import annotations

import uuid
from typing import Any, Literal

from contracts import RequestRecord
from contracts.a2a import (
    AuthenticationInfo,
    CreatePushConfigParams,
    CreatePushConfigParams03,
    ListTaskPushNotificationConfigsResponse,
    PushConfigIdParams,
    PushConfigIn,
    PushConfigRecord,
    PushConfigs,
    TaskIdParams,
    TaskPushNotificationConfig,
)
from services.gateway.a2a.errors import RpcError, parse
from services.gateway.core.errors import NotFound
from services.gateway.core.intake import Intake
from services.runtime.bus.kvstore import get_model, key_for, mutate_versioned
from services.runtime.requests.lifecycle import records
from services.runtime.requests.outcomes import push
from services.runtime.walls.egress import Egress, EgressRefused

PER_TASK = 10  # webhook configs one task may have
SOURCE = "a2a-push"
OFF = "Push notifications are not offered by this server; poll or stream."
Version = Literal["1.0", "0.3"]


def wire_03(config: TaskPushNotificationConfig) -> dict[str, Any]:
    """A config as 0.3 spells it."""
    inner: dict[str, Any] = {"id": config.id, "url": config.url}
    if config.token is not None:
        inner["token"] = config.token
    if config.authentication is not None:
        auth: dict[str, Any] = {"schemes": [config.authentication.scheme]}
        if config.authentication.credentials is not None:
            auth["credentials"] = config.authentication.credentials
        inner["authentication"] = auth
    return {"taskId": config.task_id, "pushNotificationConfig": inner}


def alike(a: PushConfigRecord, b: PushConfigRecord) -> bool:
    """The same webhook, made the same way, by the same principal (ids aside)."""
    ours = a.config.model_copy(update={"id": ""})
    return (a.principal, a.version, ours) == (
        b.principal,
        b.version,
        b.config.model_copy(update={"id": ""}),
    )


class Webhooks:
    """The push-config methods, and the check of a webhook at config time."""

    def __init__(self, intake: Intake, egress: Egress, enabled: bool) -> None:
        self.intake = intake
        self.bus = intake.bus
        self.egress = egress
        self.enabled = enabled

    def on(self) -> None:
        if not self.enabled:
            raise RpcError(-32003, OFF)

    async def _owned(self, principal: str, task_id: str) -> RequestRecord:
        try:
            return await self.intake.owned(principal, task_id)
        except NotFound as exc:
            raise RpcError(-32001, f"Task not found: {task_id[:64]}.") from exc

    async def checked(self, url: str) -> None:
        """The webhook's address through the egress wall, or -32602 saying why not."""
        try:
            await self.egress.check_url(url, source=SOURCE)
        except EgressRefused as exc:
            raise RpcError(
                -32602,
                f"Invalid params: the webhook {url[:200]} is refused ({exc.reason}): Sidekick "
                "notifies only public addresses, unless its operator allowed this one.",
            ) from exc
        except OSError as exc:
            raise RpcError(
                -32602, f"Invalid params: the webhook {url[:200]} cannot be reached ({exc})."
            ) from exc

    async def add(
        self, principal: str, task_id: str, given: PushConfigIn, version: Version
    ) -> TaskPushNotificationConfig:
        """Check `given` and keep it for the caller's task (the same id replaces it)."""
        self.on()
        await self._owned(principal, task_id)
        await self.checked(given.url)
        made = await self.keep(principal, task_id, given, version)
        await self.notify(task_id)
        return made

    async def notify(self, task_id: str) -> None:
        """After its config is kept: mark the task's record (`push`) by compare-and-set, so
        each producer that writes it next sees the mark and publishes the task's updates on its
        push subjects too. A task that had ended before the mark gets its end pushed from
        here (under the ender's own dedupe key: stored once, whoever publishes it first), so no
        race between the mark and the end loses the end."""
        tracked = await records(self.bus).notify(task_id)
        if tracked is not None and tracked.value.ended and tracked.value.outcome is not None:
            await push(self.bus, tracked.value.outcome, tracked.value.seal)

    async def keep(
        self, principal: str, task_id: str, given: PushConfigIn, version: Version
    ) -> TaskPushNotificationConfig:
        """Keep a checked config for `task_id` (which may not exist yet: SendMessage keeps it
        just before the task starts, marked). The caller marks the task then (`notify`)."""
        auth = given.authentication
        scheme = (auth.scheme or next(iter(auth.schemes or []), None)) if auth else None
        config = TaskPushNotificationConfig(
            id=given.id or uuid.uuid4().hex,
            task_id=task_id,
            url=given.url,
            token=given.token,
            authentication=(
                AuthenticationInfo(scheme=scheme, credentials=auth.credentials)
                if scheme and auth
                else None
            ),
        )
        record = PushConfigRecord(principal=principal, config=config, version=version)
        full = False
        same: TaskPushNotificationConfig | None = None

        def change(current: PushConfigs | None) -> PushConfigs | None:
            nonlocal full, same
            configs = list(current.configs) if current else []
            if given.id is None:  # a retried send without an id: the config it made before
                same = next((c.config for c in configs if alike(c, record)), None)
                if same is not None:
                    return None
            kept = [c for c in configs if c.config.id != config.id]
            full = len(kept) >= PER_TASK
            return None if full else PushConfigs(configs=[*kept, record])

        await mutate_versioned(self.bus.kv.get("push"), key_for(task_id), PushConfigs, change)
        if full:
            raise RpcError(-32602, f"Invalid params: a task has at most {PER_TASK} webhooks.")
        return same or config

    async def of_task(self, task_id: str) -> list[PushConfigRecord]:
        found, _ = await get_model(self.bus.kv.get("push"), key_for(task_id), PushConfigs)
        return list(found.configs) if found else []

    async def mine(self, principal: str, task_id: str) -> list[TaskPushNotificationConfig]:
        self.on()
        await self._owned(principal, task_id)
        return [r.config for r in await self.of_task(task_id) if r.principal == principal]

    async def create(self, params: dict[str, Any], principal: str, old: bool) -> Any:
        if old:
            given03: CreatePushConfigParams03 = parse(CreatePushConfigParams03, params)
            made = await self.add(
                principal, given03.task_id, given03.push_notification_config, "0.3"
            )
            return wire_03(made)
        given: CreatePushConfigParams = parse(CreatePushConfigParams, params)
        return (await self.add(principal, given.task_id, given, "1.0")).wire()

    def _ids(self, params: dict[str, Any], old: bool) -> tuple[str, str | None]:
        asked: PushConfigIdParams = parse(PushConfigIdParams, params)
        task_id = asked.id if old else asked.task_id
        config_id = asked.push_notification_config_id if old else asked.id
        if not task_id:
            raise RpcError(-32602, "Invalid params: the task's id is missing.")
        return task_id, config_id

    async def get(self, params: dict[str, Any], principal: str, old: bool) -> Any:
        task_id, config_id = self._ids(params, old)
        if not old and not config_id:
            raise RpcError(-32602, "Invalid params: id (the config's) is missing.")
        configs = await self.mine(principal, task_id)
        found = [c for c in configs if config_id is None or c.id == config_id]
        if not found:
            raise RpcError(-32001, f"Task {task_id[:64]} has no push config {config_id}.")
        return wire_03(found[0]) if old else found[0].wire()

    async def list(self, params: dict[str, Any], principal: str, old: bool) -> Any:
        if old:
            asked03: TaskIdParams = parse(TaskIdParams, params)
            return [wire_03(c) for c in await self.mine(principal, asked03.id)]
        task_id, _ = self._ids(params, old)
        configs = await self.mine(principal, task_id)
        return ListTaskPushNotificationConfigsResponse(configs=configs).wire()

    async def delete(self, params: dict[str, Any], principal: str, old: bool) -> Any:
        task_id, config_id = self._ids(params, old)
        if not config_id:
            raise RpcError(-32602, "Invalid params: the config's id is missing.")
        await self.mine(principal, task_id)
        gone = False

        def change(current: PushConfigs | None) -> PushConfigs | None:
            nonlocal gone
            configs = list(current.configs) if current else []
            kept = [
                c for c in configs if not (c.config.id == config_id and c.principal == principal)
            ]
            gone = len(kept) < len(configs)
            return PushConfigs(configs=kept) if gone else None

        await mutate_versioned(self.bus.kv.get("push"), key_for(task_id), PushConfigs, change)
        if not gone:
            raise RpcError(-32001, f"Task {task_id[:64]} has no push config {config_id}.")
        return None if old else {}
