"""Tests of the gateway core and its WebSocket surface."""
