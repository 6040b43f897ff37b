"""Frontline: answers small talk directly (streaming) or routes the request to the orchestrator."""
