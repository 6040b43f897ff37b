"""Orchestrator: decides the worker and owns each request's attempt loop, kept in JetStream KV.

A request enters as `request.routed` (`handlers.py`); worker results, verdicts, the user's
answers and cancels come back in the same way. It leaves as `worker.<kind>.run` and
`evaluator.run` messages while the loop runs, and as the request's end (completed, partial,
failed, cancelled) or a clarification when it stops."""
