"""Evaluator: judges a worker's output against the task and the success criteria.

A request's attempt enters as `evaluator.run` (`handlers.py`) and leaves as
`evaluation.completed` with the verdict (or questions for the user)."""
