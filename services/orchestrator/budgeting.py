"""The orchestrator's budget checks. Before each model step it sends (its decision, each attempt,
each evaluation) the step's maximum is counted in advance against the request's limits and held
against its principal's day and its session (services/runtime/requests/holds.py); a step that
does not fit is not sent, and the request ends naming the limit; the decision's own HTTP calls
(its repair too) are checked against the request's limits before each is sent, an evaluation's
by the evaluator against what the request had left (`EvaluationRequested.budget`). When a
request ends its spend is counted in its day and its session, once, releasing its hold; when it
parks (a clarification, an approval) its hold is settled down to what it has used, and its next
step holds again. Spend is also counted in Prometheus, by hashed principal and model.

A step's maximum is its prompt, estimated (about four characters a token) from what the step
carries plus `PROMPT_ALLOWANCE` for what its service adds unseen here (its system prompt, the
output schema, SEARCH's results), and its reply's `max_tokens` in full, priced at the dearer of
its model's two prices. Each step also holds the rest of its attempt where that fits (holds.py).
A worker that loops (TOOLS, RESEARCH) is held up to
SIDEKICK_BUDGET_STEP_TOKENS and told what it was granted (`TaskBudget.tokens`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from contracts import (
    ClarificationRequested,
    OrchestratorDecision,
    RequestCompleted,
    RequestRouted,
    Usage,
)
from contracts.events import TaskBudget
from services.orchestrator.loop import out_of_budget
from services.orchestrator.projection import Dispatch, Evaluate, next_messages, shown_usage
from services.orchestrator.state import SIDE_EFFECT_WORKERS, LoopState
from services.orchestrator.store import Store
from services.runtime.base.errors import BudgetSpent
from services.runtime.base.settings import Role
from services.runtime.bus.core import Bus
from services.runtime.llm import BudgetGuard, LLMClient, Structured
from services.runtime.llm.calls import estimate_tokens
from services.runtime.llm.types import Messages
from services.runtime.requests.budgets import (
    Limit,
    Scope,
    cost,
    day_key,
    limits_of,
    prices,
    prompt_estimate,
    reply_limit,
    request_limit,
    session_key,
)
from services.runtime.requests.holds import Ask, hold, park, settle

log = logging.getLogger("sidekick.orchestrator")
E = TypeVar("E")
LOOPING = frozenset({"TOOLS", "RESEARCH"})
# Workers whose one model call is a structured reply, which an invalid reply's repair may follow:
# their step holds two calls' maximum where that fits (one at least), and they may use what
# was granted (the LLM client checks the repair against it). An evaluation's step does the same
# (its verdict is a structured reply; its `EvaluationRequested.budget` carries the grant).
REPAIRED = frozenset({"EMAIL"})
PROMPT_ALLOWANCE = 2000  # tokens a step's service adds to the prompt, unseen here


class Budgets:
    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.table = prices(bus.settings.prices)
        self.granted: dict[str, tuple[str, int]] = {}  # request id: (step, tokens) last held

    def _one(self, role: Role, prompt: int) -> int:
        """One call's maximum in tokens: its prompt, estimated, and its reply in full."""
        config = self.bus.settings.llm(role)
        length = config.max_tokens_answer if role == "worker" else config.max_tokens_short
        return prompt + PROMPT_ALLOWANCE + reply_limit(length)

    def _judging(self, prompt: int) -> int:
        """An evaluation's maximum, of an output yet to be written from a prompt of `prompt`."""
        output = reply_limit(self.bus.settings.llm("worker").max_tokens_answer)
        return self._one("evaluator", prompt + output)

    def _ask(
        self, used: Usage, step: str, role: Role, prompt: int, calls: int | None, rest: int = 0
    ) -> Ask:
        """The step's hold: `calls` calls' maximum (a call, and its repair), or, for a worker
        that loops (`calls` None), up to the step allowance; one call's maximum at least."""
        settings = self.bus.settings
        config = settings.llm(role)
        one = self._one(role, prompt)
        used_tokens = used.input_tokens + used.output_tokens
        tokens = one * (calls or 1)
        if calls is None:
            left = settings.budget_request_tokens - used_tokens
            tokens = max(one, min(settings.budget_step_tokens, left))
        rate = max(self.table.get(config.model, (0.0, 0.0))) / 1_000_000
        return Ask(step, used_tokens, cost(used, self.table), tokens, one, rate, rest)

    def _step(self, state: LoopState) -> Ask | None:
        """The hold the request's next step needs, if it calls a model."""
        for message in next_messages(state):
            if isinstance(message, Dispatch):
                task = message.task
                prompt = estimate_tokens(task.model_dump_json())
                step, kind = f"task:{task.attempt}", task.worker_type
                calls = None if kind in LOOPING else 2 if kind in REPAIRED else 1
                judged = state.request.use_evaluator and kind not in SIDE_EFFECT_WORKERS
                rest = self._judging(prompt) if judged else 0
                return self._ask(state.usage, step, "worker", prompt, calls, rest)
            if isinstance(message, Evaluate):
                ev = message.request
                prompt = estimate_tokens(ev.model_dump_json())
                return self._ask(state.usage, f"evaluate:{ev.attempt}", "evaluator", prompt, 2)
        return None

    async def _check(self, req: RequestRouted, used: Usage, ask: Ask) -> Limit | None:
        """The limit the step would pass, or None once it is held in the day and the session."""
        settings = self.bus.settings
        seconds = time.time() - req.ts.timestamp()
        ahead = (ask.least, round(ask.least * ask.usd_per_token, 6))
        limit = request_limit(settings, used, seconds, self.table, ahead)
        if limit is not None:
            return limit
        scopes: tuple[tuple[Scope, str], ...] = (
            ("daily", day_key(req.principal)),
            ("session", session_key(req.principal, req.session_id)),
        )
        granted = ask.tokens
        for scope, key in scopes:
            got = await hold(
                self.bus.kv.budgets,
                key,
                req.request_id,
                replace(ask, tokens=granted),
                limits_of(settings, scope),
                scope,
                settings.budget_request_seconds,
            )
            if isinstance(got, Limit):
                return got
            granted = min(granted, got)
        self.granted[req.request_id] = (ask.step, granted)
        return None

    async def over(self, state: LoopState) -> str | None:
        """The note naming the limit the request's next model step would pass (or has reached);
        None when it may go on (its step held), or sends nothing more."""
        ask = self._step(state)
        if ask is None:
            return None
        limit = await self._check(state.request, state.usage, ask)
        return limit.note() if limit is not None else None

    async def before_decision(self, req: RequestRouted, messages: Messages) -> str | None:
        """The same for the decision, the request's first model step."""
        prompt = estimate_tokens(req.model_dump_json())
        rest = self._one("worker", prompt) + (self._judging(prompt) if req.use_evaluator else 0)
        decide = prompt_estimate(messages)
        ask = self._ask(Usage(), "decide", "orchestrator", decide, 1, rest)
        limit = await self._check(req, Usage(), ask)
        return limit.note() if limit is not None else None

    async def decide(
        self, llm: LLMClient, req: RequestRouted, messages: Messages
    ) -> Structured[OrchestratorDecision]:
        """The decision, once its step is held, each of its HTTP calls (a repair too) checked
        against the request's limits first: BudgetSpent, with a full note, when one would pass."""
        note = await self.before_decision(req, messages)
        if note is not None:  # the decision's call would pass a limit: never made
            raise BudgetSpent("orchestrator", llm.model, note, Usage())
        return await llm.structured(messages, OrchestratorDecision, budget=self._guard(req))

    def _guard(self, req: RequestRouted) -> BudgetGuard:
        settings = self.bus.settings
        rate = max(self.table.get(settings.llm("orchestrator").model, (0.0, 0.0))) / 1_000_000

        def check(used: Usage, ahead: int) -> str | None:
            seconds = time.time() - req.ts.timestamp()
            usd = round(ahead * rate, 6)
            limit = request_limit(settings, used, seconds, self.table, (ahead, usd))
            return limit.note() if limit is not None else None

        return check

    async def stop_if_over(self, store: Store, state: LoopState) -> LoopState:
        """The state, ended (partial or failed, naming the limit) when a budget has run out."""
        note = await self.over(state)
        if note is None:
            return state
        return await store.update(state.request.request_id, lambda s: out_of_budget(s, note))

    def left(self, state: LoopState) -> TaskBudget:
        """What the request may still spend on its next step (an attempt's worker, or its
        evaluation while `evaluating`): its limits less its usage, and no more tokens than the
        step was granted (the same from the same state: a redelivered step is granted what it
        was before)."""
        used = state.usage
        settings = self.bus.settings
        tokens = settings.budget_request_tokens - used.input_tokens - used.output_tokens
        granted = self.granted.pop(state.request.request_id, None)
        kind = "evaluate" if state.status == "evaluating" else "task"
        if granted is not None and state.current and granted[0] == f"{kind}:{state.current.n}":
            tokens = min(tokens, granted[1])
        return TaskBudget(
            tokens=max(tokens, 0),
            calls=max(settings.budget_request_calls - used.calls, 0),
            tool_calls=max(settings.budget_request_tool_calls - used.tool_calls, 0),
        )

    def priced(self, event: E, state: LoopState) -> E:
        """A completed request's end, with its cost."""
        if isinstance(event, RequestCompleted):
            return event.model_copy(update={"cost_usd": cost(shown_usage(state), self.table)})
        return event

    async def settle(self, state: LoopState, event: E) -> E:
        """The request's spend settled as `event` says: counted (and the end priced) when it
        ends, its hold released down to what it used when it parks."""
        if isinstance(event, ClarificationRequested):
            await self.park(state, event)
            return event
        await self.charge(state)
        return self.priced(event, state)

    async def park(self, state: LoopState, event: ClarificationRequested) -> None:
        """A parked request sends nothing until it resumes: its holds in its day and its session
        become what it used so far, until it may have ended (its wait, then its wall time)."""
        req, settings = state.request, self.bus.settings
        self.granted.pop(req.request_id, None)
        used = state.usage
        spent = (used.input_tokens + used.output_tokens, cost(used, self.table))
        wait = settings.approval_timeout if event.approval else settings.clarification_timeout
        keys = (day_key(req.principal), session_key(req.principal, req.session_id))
        try:
            for key in keys:
                ttl = wait + settings.budget_request_seconds
                await park(self.bus.kv.budgets, key, req.request_id, spent, ttl)
        except Exception as exc:  # it parks all the same; its hold lapses in time
            log.warning("request %s: could not release its hold: %r", req.request_id, exc)

    async def charge(self, state: LoopState) -> None:
        """Add the ended request's spend to its principal's day and its session (once each,
        dropping its holds) and to the counters."""
        req = state.request
        self.granted.pop(req.request_id, None)
        who = (req.principal, req.session_id)
        try:
            await settle(self.bus.kv.budgets, who, req.request_id, state.usage, self.table)
        except Exception as exc:  # the answer stands; only the count lacks it
            log.warning("request %s: could not count its spend: %r", req.request_id, exc)


def stopped(exc: BudgetSpent) -> Callable[[LoopState], LoopState]:
    """The update that ends a request whose decision the budget stopped: the usage of the calls
    made counted, the note naming the limit."""
    return lambda s: out_of_budget(s.model_copy(update={"usage": s.usage + exc.usage}), exc.note)
