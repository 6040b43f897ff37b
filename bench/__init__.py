"""Sidekick's benchmark suite: `python -m bench` (see docs/benchmarks.md)."""
