"""The gateway's core: what every surface shares, and nothing of any one surface's shape.

`intake.py` is the one way in: `Intake.say` takes what a person says into a session (the
message limit, the session's lane, the budget, the per-principal limits, then "answer the
request parked on the user, else submit a new one") and returns one typed result (`said.py`)
that each surface renders in its own shape; `answers.py` resumes a request parked on a question.
Then: `outbound.py` (client-bound events from the bus, for the sessions this gateway holds),
`copies.py` (its copies of those sessions' records) and `hub.py` (to the sockets and callers
waiting for them), `feed.py` (a request's stored events, to re-attach to), `index.py` (each
principal's requests), `deliveries.py`,
`catchup.py`, `limits.py`, `auth.py`, `origins.py`, `http.py` (the HTTP plumbing),
`outcomes.py` (how a question or an end reads on any surface), `preferences.py`, `errors.py`,
`spend.py` (a spent day or session refused, from services/runtime/budgets/) and `approving.py`
(a person's decision, from services/runtime/approvals/).
The core imports no surface (tests/docs/test_architecture.py)."""
