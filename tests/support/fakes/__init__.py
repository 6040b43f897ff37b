"""Local HTTP servers that play the outside world's APIs in their real shapes."""
