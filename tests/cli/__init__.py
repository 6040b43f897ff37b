"""The command line as a user runs it: `sidekick up`, `chat`, `doctor`, `outbox`, `eval`, and
`python -m bench`."""
