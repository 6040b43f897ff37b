"""The gateway's core and its WebSocket: tokens, limits, fuzzed frames, one conversation per
session, readiness, the web page."""
