"""A request's life on the bus: its record and the lifecycle table (lifecycle.py), the
one-at-a-time lane of a session (lanes.py), the session's history (sessions.py), how a request
ends (outcomes.py, failures.py), cancels, streamed chunks and the email outbox. Imports `bus`,
`walls`, `llm` and `base`, never `hosting`."""
