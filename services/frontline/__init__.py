"""Frontline: answers small talk directly (streaming) or routes the request to the orchestrator.

A request enters as `chat.requested` (`handlers.py`) and leaves either as a streamed answer and
its `completed` end, or as `request.routed` for the orchestrator."""
