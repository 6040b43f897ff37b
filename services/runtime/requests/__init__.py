"""A request's life on the bus. Imports `bus`, `walls`, `llm` and `base`, never `hosting`.

- lifecycle.py: a request's record and the one compare-and-set every service uses to move it.
- table.py: a request's states and the legal moves as one table, drawn as the diagram in
  docs/architecture.md.
- lanes.py: one conversation at a time: a session's lane (active, queued, handoff).
- sessions.py: a session's record: its history, the parked request, results not yet seen.
- outcomes.py: how a request ends (or parks), whichever service ends it.
- failures.py: runtime errors turned into the failure codes clients see.
- cancels.py: hearing cancellations, and the flags left for cancels that came before a
  process started.
- streaming.py: a reply's tokens on their way to the client, coalesced into chunks.
- replays.py: what marks a request as a replay, which acts on nothing in the world.
- outbox.py: the local outbox of mail the EMAIL worker could not send.
- budgets.py: what one request, one session and one principal per UTC day may spend; prices.
- holds.py: holds on the day and the session before each model step, settled when it ends.
- guards.py: the budget check before each HTTP model call, handed to the LLM client.
- approvals.py: approvals in the `approvals` bucket, decided once by compare-and-set.
"""
