"""Each principal's requests, listed in the gateway's own KV bucket `<ns>_index`: one key per
request (`<hash of principal>.<accepted at, ns>.<hash of request>`, value: the request id), so
`GET /api/workflows` never scans the status bucket and concurrent requests of one principal
never contend for one key."""

from __future__ import annotations

import time

from nats.js.kv import KeyValue

from services.runtime.bus.core import Bus
from services.runtime.bus.kvstore import key_for


class Index:
    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self._kv: KeyValue | None = None

    async def start(self) -> None:
        self._kv = await self.bus.bucket("index")

    async def recent(self, principal: str, limit: int) -> list[str]:
        """The principal's request ids, newest first."""
        assert self._kv is not None, "Intake.start() has not run"
        # A watch filtered on the principal's prefix: the server sends only its keys.
        watcher = await self._kv.watch(f"{key_for(principal)}.>", ignore_deletes=True)
        found: list[tuple[str, str]] = []
        try:
            async for entry in watcher:
                if entry is None:  # the end of what is stored
                    break
                if entry.value:
                    found.append((entry.key, entry.value.decode()))
        finally:
            await watcher.stop()  # type: ignore[no-untyped-call]
        return [request_id for _, request_id in sorted(found, reverse=True)[:limit]]

    async def remember(self, principal: str, request_id: str) -> None:
        assert self._kv is not None, "Intake.start() has not run"
        key = f"{key_for(principal)}.{time.time_ns():020d}.{key_for(request_id)[:12]}"
        await self._kv.put(key, request_id.encode())
