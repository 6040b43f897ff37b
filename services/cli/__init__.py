"""The command line: `sidekick up | run | bootstrap | chat | outbox | nats-config`, a module
each."""

from services.cli.main import main

__all__ = ["main"]
