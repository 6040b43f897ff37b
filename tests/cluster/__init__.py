"""Tests of NATS clusters: faults, replicas, durability, outages."""
