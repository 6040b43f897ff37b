"""The command line: `sidekick up | run | chat | outbox | nats-config`, one module each."""

from services.cli.main import main

__all__ = ["main"]
