"""Parked requests (awaiting the user's answers) and their deadlines, in a small KV bucket,
swept periodically by every orchestrator replica (the state transition is idempotent).

A request parked on an approval keeps the approval's id beside its deadline (`Parked` in
services/runtime/approvals/records.py), so the sweep can also resume one whose approval was
decided but whose request never moved on (the gateway stopped between recording the decision
and passing it on), and the gateway can list the approvals waiting now without reading the
whole `approvals` bucket."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

import nats.js.errors
from nats.js.kv import KeyValue

from services.runtime.approvals.records import Parked

log = logging.getLogger("sidekick.parking")


class ParkingLot:
    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.kv: KeyValue | None = None
        self._task: asyncio.Task[None] | None = None

    async def park(self, request_id: str, wait: float, approval_id: str | None = None) -> None:
        assert self.kv is not None
        await self.kv.put(request_id, Parked(time.time() + wait, approval_id).encode())

    async def release(self, request_id: str) -> None:
        assert self.kv is not None
        with contextlib.suppress(nats.js.errors.KeyNotFoundError):
            await self.kv.delete(request_id)

    def start(
        self,
        kv: KeyValue,
        on_timeout: Callable[[str], Awaitable[None]],
        on_waiting: Callable[[str, str], Awaitable[None]] | None = None,
    ) -> None:
        """Sweep every `interval`: `on_timeout(request_id)` once a deadline has passed, and
        `on_waiting(request_id, approval_id)` for each request still parked on an approval."""
        self.kv = kv
        self._task = asyncio.create_task(self._sweep(on_timeout, on_waiting))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _sweep(
        self,
        on_timeout: Callable[[str], Awaitable[None]],
        on_waiting: Callable[[str, str], Awaitable[None]] | None,
    ) -> None:
        assert self.kv is not None
        failing = False  # one line per outage of the bus, not one per sweep
        while True:
            await asyncio.sleep(self.interval)
            try:
                keys = await self.kv.keys()
            except nats.js.errors.NoKeysError:
                keys = []
            except Exception as exc:
                if not failing:
                    log.warning("parked-request sweep paused: the bus does not answer (%r)", exc)
                failing = True
                continue
            if failing:
                log.info("parked-request sweep: the bus answers again")
                failing = False
            now = time.time()
            for key in keys:
                try:
                    parked = Parked.decode((await self.kv.get(key)).value)
                    if parked.deadline <= now:
                        await on_timeout(key)
                        await self.release(key)
                    elif parked.approval_id is not None and on_waiting is not None:
                        await on_waiting(key, parked.approval_id)
                except nats.js.errors.KeyNotFoundError:
                    continue
                except Exception as exc:
                    log.warning("could not time out %s: %r", key, exc)
