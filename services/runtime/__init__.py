"""Plumbing shared by every service, in sub-packages by what they are for, lowest first:

- base/: settings, errors, logs, metrics, traces, the event loop, child processes;
- walls/, llm/, bus/: the walls around untrusted input, the model client, the NATS bus;
- requests/, budgets/: a request's life (lifecycle, lanes, sessions, outcomes, cancels, streams,
  outbox); what it may spend, and the one seam every service spends through;
- approvals/: a person's approval of an action, from the worker's ask to its decision;
- hosting/: one service process and its health.

A sub-package imports only those before it in this list (walls, llm and bus not each other,
requests and budgets not each other);
tests/docs/test_architecture.py keeps the direction."""
