"""One service process: start, serve health and metrics, shut down (host.py), and what a
service's health says about the whole system (health.py). The top of the runtime: it may import
every other sub-package; none imports it."""
