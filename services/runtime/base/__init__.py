"""What every part of a service uses. Imports nothing else of `services.runtime` (only contracts
and libraries), so every other sub-package may import it.

- settings.py: the configuration from the environment (prefix `SIDEKICK_`), shared by every
  service.
- errors.py: `SidekickError`, and the one drawing of every error class of the project under it.
- logs.py: one line (or one JSON object) per record, each with its service and request id.
- quietlog.py: refusals logged without filling the disk (one line, then a summary per interval).
- metrics.py: the domain's Prometheus metrics, one registry per process.
- telemetry.py: the OpenTelemetry set-up (an OTLP exporter only when one is configured).
- eventloop.py: the event loop every service process runs on.
- children.py: child processes (a free port, dying with the parent, stopping) and the five
  services as children of one process.
- readyz.py: waiting for a process's `/readyz` to say it is ready.
"""
