"""What every part of a service uses: settings, errors, logs, metrics, traces, the event loop,
child processes and the readiness file. Imports nothing else of `services.runtime` (only
contracts and libraries), so every other sub-package may import it."""
