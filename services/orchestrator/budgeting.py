"""The orchestrator's budget checks: before each attempt or evaluation it sends, the request's
spend (and its principal's day, with this request's spend added) against the limits
(services/runtime/requests/budgets.py); when a request ends, its spend is added to its
principal's day, once. Spend is also counted in Prometheus, by hashed principal and model."""

from __future__ import annotations

import logging
import time
from typing import TypeVar

from contracts import RequestCompleted, Usage
from contracts.events import TaskBudget
from services.orchestrator.loop import out_of_budget
from services.orchestrator.projection import Dispatch, Evaluate, next_messages
from services.orchestrator.state import LoopState
from services.orchestrator.store import Store
from services.runtime.base.metrics import SPEND_TOKENS, SPEND_USD
from services.runtime.bus.core import Bus
from services.runtime.bus.kvstore import key_for
from services.runtime.requests.budgets import Day, Days, cost, day_limit, prices, request_limit

log = logging.getLogger("sidekick.orchestrator")
E = TypeVar("E")


class Budgets:
    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.table = prices(bus.settings.prices)

    async def over(self, state: LoopState) -> str | None:
        """The note naming the limit the request has reached, when its next step would call a
        model; None when it may go on (or sends nothing more)."""
        if not any(isinstance(m, Dispatch | Evaluate) for m in next_messages(state)):
            return None
        settings = self.bus.settings
        seconds = time.time() - state.request.ts.timestamp()
        limit = request_limit(settings, state.usage, seconds, self.table)
        if limit is None:
            day = await Days(self.bus.kv.budgets).load(state.request.principal)
            usage = state.usage
            now = Day(
                input_tokens=day.input_tokens + usage.input_tokens,
                output_tokens=day.output_tokens + usage.output_tokens,
                usd=day.usd + cost(usage, self.table),
            )
            limit = day_limit(settings, now)
        return limit.note() if limit is not None else None

    async def stop_if_over(self, store: Store, state: LoopState) -> LoopState:
        """The state, ended (partial or failed, naming the limit) when a budget has run out."""
        note = await self.over(state)
        if note is None:
            return state
        return await store.update(state.request.request_id, lambda s: out_of_budget(s, note))

    def left(self, state: LoopState) -> TaskBudget:
        """What the request may still spend, for a worker that loops over model calls (the
        same from the same state, so a redelivered dispatch carries the same)."""
        used = state.usage
        settings = self.bus.settings
        tokens = settings.budget_request_tokens - used.input_tokens - used.output_tokens
        return TaskBudget(
            tokens=max(tokens, 0), calls=max(settings.budget_request_calls - used.calls, 0)
        )

    def priced(self, event: E, state: LoopState) -> E:
        """A completed request's end, with its cost."""
        if isinstance(event, RequestCompleted):
            return event.model_copy(update={"cost_usd": cost(state.usage, self.table)})
        return event

    async def charge(self, state: LoopState) -> None:
        """Add the ended request's spend to its principal's day (once) and to the counters."""
        req, usage = state.request, state.usage
        usd = cost(usage, self.table)
        try:
            _, fresh = await Days(self.bus.kv.budgets).charge(
                req.principal, req.request_id, usage, usd
            )
        except Exception as exc:  # the answer stands; only the day's count lacks it
            log.warning("request %s: could not count its spend: %r", req.request_id, exc)
            return
        if not fresh:
            return  # counted before (a redelivery): the counters were counted then too
        who = key_for(req.principal)[:12]
        for model, used in usage.models.items():
            SPEND_TOKENS.labels(who, model, "input").inc(used.input_tokens)
            SPEND_TOKENS.labels(who, model, "output").inc(used.output_tokens)
            SPEND_USD.labels(who, model).inc(cost(Usage(models={model: used}), self.table))
