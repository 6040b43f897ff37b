"""`sidekick eval`: measures answer quality with and without the evaluator loop.

cases.jsonl  the dataset: one case a line (message, success criteria, decidable checks)
cases.py     the case model, loading, and the checks as plain functions
recorded.py  cases made from recorded requests (--from-requests), read from the gateway
runner.py    one case against a running system, over the WebSocket, as a client does
judge.py     the optional LLM judge for open-ended cases (its own role and model)
report.py    figures per mode, prices, the table, the JSON file, comparing two runs
system.py    starting a system of its own when no --url is given
"""
