"""What a model step may take at most (its `Ask`), counted before it is sent.

A call's maximum is its prompt, estimated (four ASCII characters a token and one for any other
character: llm/calls.py's `estimate_tokens`; tool definitions included), and its reply's
`max_tokens` in full, priced at the dearer of its model's two prices.
The frontline's one call estimates its prompt in whichever convention is the larger. An
orchestrated step adds `PROMPT_ALLOWANCE` for what its service adds unseen by the orchestrator
(its system prompt, the output schema, SEARCH's results); a step also asks for the rest of its
attempt where that fits (`Ask.rest`: the decision the worker's call and the evaluation, a
worker's step the evaluation). A worker whose one call is a structured reply (`REPAIRED`) asks
for two calls (the reply and its repair), one at least, as an evaluation does; a worker that
loops over model calls (`LOOPING`) asks for up to SIDEKICK_BUDGET_STEP_TOKENS, one call at least,
and is told what it was granted (`TaskBudget.tokens`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from contracts import EvaluationRequested, RequestRouted, Usage, WorkerTask
from services.runtime.base.settings import Role, Settings
from services.runtime.budgets.prices import Table, cost, per_token
from services.runtime.llm import calls
from services.runtime.llm.calls import estimate_tokens
from services.runtime.llm.calls import reply_limit as reply_limit  # where callers find it
from services.runtime.llm.choice import Choice, Convention, tool
from services.runtime.llm.types import Messages

LOOPING = frozenset({"TOOLS", "RESEARCH"})
# Workers whose one model call is a structured reply, which an invalid reply's repair may follow:
# their step holds two calls' maximum where that fits (one at least), and they may use what
# was granted (the LLM client checks the repair against it). An evaluation's step does the same
# (its verdict is a structured reply; its `EvaluationRequested.budget` carries the grant).
REPAIRED = frozenset({"EMAIL"})
PROMPT_ALLOWANCE = 2000  # tokens a step's service adds to the prompt, unseen here


@dataclass(frozen=True)
class Ask:
    """One step's hold: what the request has used so far, and what the step may take."""

    step: str  # e.g. "decide", "task:1", "evaluate:1"
    used_tokens: int
    used_usd: float
    tokens: int  # the most the step may take
    least: int  # the least it can go with (one call's maximum); == tokens for one call
    usd_per_token: float  # its price bound per token
    rest: int = 0  # the rest of its attempt (the worker, the evaluation): held if it fits


def prompt_estimate(messages: Any, tools: Any = None) -> int:
    """A call's prompt in tokens, estimated as a server's missing usage is counted (four ASCII
    characters a token, one for any other character), its tool definitions included."""
    return calls.prompt_estimate(messages, {"tools": tools} if tools else None)


class Asks:
    """Each step's `Ask`, by the roles' settings and the price table."""

    def __init__(self, settings: Settings, table: Table) -> None:
        self.settings = settings
        self.table = table

    def rate(self, role: Role) -> float:
        return per_token(self.table, self.settings.llm(role).model)

    def answer_or_route(self, build: Callable[[Convention], Messages], route: Choice) -> Ask:
        """The frontline's one call (a direct answer, or the call that routes): its prompt,
        estimated, and its reply in full."""
        prompt = max(
            prompt_estimate(build("tools"), [tool(route)]),
            prompt_estimate(build("marker")),
        )
        tokens = prompt + reply_limit(self.settings.llm("frontline").max_tokens_answer)
        return Ask("frontline", 0, 0.0, tokens, tokens, self.rate("frontline"))

    def decision(self, req: RequestRouted, messages: Messages) -> Ask:
        """The orchestrator's decision, the request's first step, with the rest of its first
        attempt (the worker's call, and its evaluation when it has one)."""
        prompt = estimate_tokens(req.model_dump_json())
        rest = self._one("worker", prompt) + (self._judging(prompt) if req.use_evaluator else 0)
        return self._ask(Usage(), "decide", "orchestrator", prompt_estimate(messages), 1, rest)

    def task(self, task: WorkerTask, used: Usage, judged: bool) -> Ask:
        """An attempt's worker (`judged`: its evaluation follows, held with it if it fits)."""
        prompt = estimate_tokens(task.model_dump_json())
        kind = task.worker_type
        calls_ = None if kind in LOOPING else 2 if kind in REPAIRED else 1
        rest = self._judging(prompt) if judged else 0
        return self._ask(used, f"task:{task.attempt}", "worker", prompt, calls_, rest)

    def evaluation(self, ev: EvaluationRequested, used: Usage) -> Ask:
        prompt = estimate_tokens(ev.model_dump_json())
        return self._ask(used, f"evaluate:{ev.attempt}", "evaluator", prompt, 2)

    def _one(self, role: Role, prompt: int) -> int:
        """One call's maximum in tokens: its prompt, estimated, and its reply in full."""
        config = self.settings.llm(role)
        length = config.max_tokens_answer if role == "worker" else config.max_tokens_short
        return prompt + PROMPT_ALLOWANCE + reply_limit(length)

    def _judging(self, prompt: int) -> int:
        """An evaluation's maximum, of an output yet to be written from a prompt of `prompt`."""
        output = reply_limit(self.settings.llm("worker").max_tokens_answer)
        return self._one("evaluator", prompt + output)

    def _ask(
        self, used: Usage, step: str, role: Role, prompt: int, calls_: int | None, rest: int = 0
    ) -> Ask:
        """The step's hold: `calls_` calls' maximum (a call, and its repair), or, for a worker
        that loops (`calls_` None), up to the step allowance; one call's maximum at least."""
        one = self._one(role, prompt)
        used_tokens = used.input_tokens + used.output_tokens
        tokens = one * (calls_ or 1)
        if calls_ is None:
            left = self.settings.budget_request_tokens - used_tokens
            tokens = max(one, min(self.settings.budget_step_tokens, left))
        return Ask(step, used_tokens, cost(used, self.table), tokens, one, self.rate(role), rest)
