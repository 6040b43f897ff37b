"""The walls around what models, pages and users choose. Imports `base` only.

- egress.py: the egress check for URLs (nothing loopback, private, link-local or otherwise not
  public).
- httpguard.py: the HTTP server's guards against slow, many or oversized clients.
- jsonlimits.py: JSON from strangers bounded in nesting before it is parsed (`TooDeep`).
- secrets.py: which secrets each process may hold.
"""
