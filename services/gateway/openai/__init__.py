"""The OpenAI-compatible surface under `/v1`."""
