"""Budgets: what a request, a session and a principal's UTC day may spend, and the one seam
every service spends through, `Budget.step` (meter.py), which holds a model step before it is
sent and settles it however the step ends.

- meter.py: the seam: `Budget`, its `step` (an `async with` that holds, meters and settles),
  `Meter`, and `OverBudget`, the refusal carrying the `Limit`.
- prices.py: the price table (`SIDEKICK_PRICES` over OpenAI's list prices) and what usage costs.
- limits.py: the request's, the session's and the day's limits, and `Limit`, the one a spend
  reached.
- asks.py: what each step may take at most (`Ask`): the frontline's call, the orchestrator's
  decision, an attempt's worker, an evaluation.
- accounts.py: the day's and the session's records in the `budgets` bucket and counting a
  request's spend in them, once per request.
- holds.py: holding a step against the day and the session by compare-and-set, settling a
  hold (parked, released), one step at a time.
- leases.py: a process's lease of a busy principal's day (or of a session's allowance): one
  compare-and-set takes a slice that steps are held from in memory, and one writes the counts
  batched meanwhile, renews, grows, shrinks or returns it; a dead process's lease lapses.
- ledger.py: a process's budgets, key by key: each step held, counted or parked from its lease
  where it has one, else in the bucket; a count the bucket does not take, kept until it lands.
- guard.py: the per-call check handed to the LLM client (a worker's and an evaluation's grant,
  the decision's request limits), and a worker's result when it stopped.
- admission.py: the gateway's refusal of a new request whose day or session is spent (a busy
  principal's read at most once every SIDEKICK_BUDGET_ADMISSION_SECONDS).
- quota.py: the tools' quota: how much disk and how many files a session's folder may hold.

Imports `bus`, `llm` and `base`, never `requests`, `approvals` or `hosting`."""

from services.runtime.budgets.asks import Ask
from services.runtime.budgets.limits import Limit
from services.runtime.budgets.meter import Budget, Meter, OverBudget

__all__ = ["Ask", "Budget", "Limit", "Meter", "OverBudget"]
