"""The idempotency ledger across a bus outage, in memory and on the real server: a claim whose
write landed but whose answer was lost (the NATS client sends what it buffered once the server is
back, after the caller timed out) is taken over by this process's retry, once; a `started` claim
that is not this process's lost one is still never acted on again (at most once). End to end:
tests/cluster/test_outage_in_worker.py."""

from __future__ import annotations

from typing import Any

import nats.errors
import pytest

from contracts import new_id
from services.workers.ledger import Effect, Ledger


class LostAnswer:
    """A bucket whose next create is written but answered with a timeout."""

    def __init__(self, kv: Any) -> None:
        self.kv = kv
        self.lose_next = True

    async def create(self, key: str, value: bytes) -> int:
        revision = int(await self.kv.create(key, value))
        if self.lose_next:
            self.lose_next = False
            raise nats.errors.TimeoutError
        return revision

    def __getattr__(self, name: str) -> Any:
        return getattr(self.kv, name)


async def test_a_claim_whose_answer_was_lost_is_taken_over_by_the_retry_once(kv: Any) -> None:
    key = f"email.{new_id()}.1"
    ledger = Ledger(LostAnswer(kv), stale_after=5)  # type: ignore[arg-type]
    with pytest.raises(TimeoutError):
        await ledger.claim(key)
    assert await ledger.claim(key) is None  # the retry owns it: the effect was never done
    await ledger.record(key, Effect(state="succeeded", output="sent"))
    replayed = await ledger.claim(key)
    assert replayed is not None and (replayed.state, replayed.output) == ("succeeded", "sent")


async def test_a_started_claim_that_is_not_our_lost_one_is_never_acted_on_again(kv: Any) -> None:
    key = f"email.{new_id()}.1"
    await kv.create(key, Effect(state="started", claim="another").model_dump_json().encode())
    found = await Ledger(kv, stale_after=0.3).claim(key)
    assert found is not None and found.state == "started"  # reported as unknown, not re-sent
