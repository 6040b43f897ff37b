"""Sidekick's services: one package per role, plus the shared `runtime`."""
