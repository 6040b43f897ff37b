"""Approvals: a consequential action (an email to send, a notification to push, a tool to run)
that the operator's policy says a person must allow, from the worker's ask to the person's
decision and back to the worker that then acts on exactly what was approved.

- policy.py: the operator's approval policy (`allow`, `ask` or `deny` per action, and who
  decides), from SIDEKICK_APPROVALS and SIDEKICK_APPROVAL_POLICY.
- records.py: approvals in the `approvals` bucket, opened once and decided once by
  compare-and-set; a parked request's entry in the `parked` bucket.
- gate.py: the worker's side: the ruling on an action, the decided approval of exactly its
  arguments (at this or an earlier attempt), the ask when there is none, a decline in words.
- asking.py: the orchestrator's side, as plain logic: the approval an ask opens (or why no more
  may be asked), who may decide it, and whether a decision is the one a request waits on.
- waiting.py: the orchestrator's I/O for a request parked on an approval: open it, find it
  decided, expire it.
- deciding.py: a person's decision from any surface: recorded, the request moved on, the
  orchestrator told.
- questions.py: the approval as a question in words (every text surface shows it), and the
  words a person answers with.
- errors.py: what approvals refuse, drawn as a tree.

Imports `requests`, `bus` and `base`, never `hosting`."""
