"""The gateway's core and its WebSocket: tokens, limits, fuzzed frames, one conversation per
session, live delivery once, readiness, the web page."""
