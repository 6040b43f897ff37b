"""The loop: frontline, orchestrator and evaluator, their attempt logic, the semantic cache, and
chats end to end."""
