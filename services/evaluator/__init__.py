"""Evaluator: judges a worker's output against the task and the success criteria."""
