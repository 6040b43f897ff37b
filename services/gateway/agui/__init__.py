"""The AG-UI endpoint: a run is one Sidekick request (or the resumption of a parked one), its
events are the request's bus events translated into the protocol's, and a client re-attaches
to a run from the last event id it saw (services/gateway/core/feed.py)."""
