"""The bus under stress: a NATS cluster, replicas, killed services, durability, outages and
catch-up."""
