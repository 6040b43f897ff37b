"""The LLM client: structured output, server modes, fallbacks, no model at all, and the tiny local
model's real server."""
