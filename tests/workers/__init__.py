"""The workers: search, research, email, and the TOOLS worker's tools (files, web, notify, browser,
MCP, the sandbox)."""
