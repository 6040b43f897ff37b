"""Orchestrator: decides the worker and owns each request's attempt loop, kept in JetStream KV."""
