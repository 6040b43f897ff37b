"""The A2A server: the agent card (card.py), JSON-RPC at `/a2a` with the 1.0 method names and
the 0.3 ones (rpc.py, legacy.py), tasks as Sidekick requests (service.py, tasks.py), push
notifications (webhooks.py: the configs; push.py: the outbox's reader and the signed POSTs),
and the errors (errors.py)."""
