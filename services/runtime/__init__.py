"""Plumbing shared by every service: settings, the broker and bus topology, the LLM client."""
