"""Sidekick's benchmark suite: `python -m bench` (see README.md, section Benchmarks)."""
