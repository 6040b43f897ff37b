"""The bus under stress: a NATS cluster, replicas, killed services, a hung server, durability,
outages and catch-up."""
