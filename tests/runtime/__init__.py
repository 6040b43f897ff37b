"""The runtime under the services: the wire contracts, a request's lifecycle and record, the
messages a request costs, starting, metrics, tracing, a quiet log."""
