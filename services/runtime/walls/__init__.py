"""The walls around what models, pages and users choose: the egress check for URLs (egress.py),
the HTTP server's guards against slow or oversized clients (httpguard.py), and which secrets a
process may hold (secrets.py). Imports `base` only."""
