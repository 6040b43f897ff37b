"""The frontline's budget. Its one model call (a direct answer, or the call that routes) is held
before it is made, as each orchestrator step is (services/runtime/requests/holds.py): the call's
maximum, its prompt estimated (tool definitions included, in whichever convention is the larger)
and its `max_tokens` in full, priced at the dearer of its model's two prices, against the
principal's UTC day and the session. A call that does not fit is not made; the request ends
`failed` with `budget_exhausted`, naming the limit, as the orchestrator ends one with no answer.

Once the frontline is done with the call its usage is counted in the day and the session, once,
dropping the hold: before a direct answer's end is published, and, for a routed request, at the
handoff, before `request.routed` is published (the orchestrator then counts its own steps when
the request ends). The frontline holds and counts under its own name for the request
(`holder`), so its count and the orchestrator's are two entries that never stand for each other;
a redelivery finds its hold (granted again, nothing written) or its count (counted nothing)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from contracts import ChatRequested, Usage
from services.frontline import prompts
from services.runtime.bus.core import Bus
from services.runtime.llm import Messages
from services.runtime.llm.choice import Convention, tool
from services.runtime.requests.budgets import (
    Limit,
    prices,
    prompt_estimate,
    reply_limit,
    request_limit,
)
from services.runtime.requests.holds import Ask, hold_both, settle

log = logging.getLogger("sidekick.frontline")
STEP = "frontline"


def holder(request_id: str) -> str:
    """The name the frontline's hold and count of `request_id` go under in a day's value."""
    return f"{request_id}.{STEP}"


class Spending:
    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.table = prices(bus.settings.prices)  # a direct answer is priced as any other

    def ask(self, build: Callable[[Convention], Messages]) -> Ask:
        """The call's maximum: its prompt, estimated, and its reply in full."""
        config = self.bus.settings.llm("frontline")
        prompt = max(
            prompt_estimate(build("tools"), [tool(prompts.ROUTE)]),
            prompt_estimate(build("marker")),
        )
        tokens = prompt + reply_limit(config.max_tokens_answer)
        rate = max(self.table.get(config.model, (0.0, 0.0))) / 1_000_000
        return Ask(STEP, 0, 0.0, tokens, tokens, rate)

    async def hold(self, req: ChatRequested, ask: Ask) -> Limit | None:
        """The limit the call would pass, or None once it is held in the day and the session."""
        settings = self.bus.settings
        ahead = (ask.least, round(ask.least * ask.usd_per_token, 6))
        seconds = time.time() - req.ts.timestamp()
        limit = request_limit(settings, Usage(), seconds, self.table, ahead)
        if limit is not None:
            return limit
        who = (req.principal, req.session_id)
        return await hold_both(self.bus.kv.budgets, settings, who, holder(req.request_id), ask)

    async def count(self, req: ChatRequested, usage: Usage) -> None:
        """Count the call's usage in the day and the session (once), dropping the hold."""
        who = (req.principal, req.session_id)
        try:
            await settle(self.bus.kv.budgets, who, holder(req.request_id), usage, self.table)
        except Exception as exc:  # the answer stands; only the count lacks it
            log.warning("request %s: could not count its spend: %r", req.request_id, exc)
