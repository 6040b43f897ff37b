"""Workers: one durable consumer per kind, each on its own subject, so kinds scale apart.

A request's attempt enters as `worker.<kind>.run` (`app.py` registers each kind's module) and
leaves as `worker.completed` with the output, its sources and usage."""
