"""The WebSocket surface at `/ws`: Sidekick's event frames and the seeds' legacy protocol."""
