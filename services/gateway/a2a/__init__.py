"""The A2A server: the agent card (card.py), JSON-RPC at `/a2a` with the 1.0 method names and
the 0.3 ones (rpc.py, legacy.py), tasks as Sidekick requests (tasks.py)."""
