"""One service process. The top of the runtime: it may import every other sub-package; none
imports it.

- host.py: `ServiceHost`: start, serve health and metrics, shut down.
- health.py: readiness over the bus: what a service's health says about the whole system.
- natsreach.py: a service and its NATS servers: waiting for one, refusing a refused login,
  exiting when the bus has been gone too long.
- endpoints.py: what one process learns about a model endpoint (its mode, whether it reports
  usage), shared with the others through the `endpoints` bucket.
"""
