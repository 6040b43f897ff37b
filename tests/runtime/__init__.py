"""The runtime under the services: the wire contracts, a request's lifecycle, starting, metrics,
tracing, a quiet log."""
