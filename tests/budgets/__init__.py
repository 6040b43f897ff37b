"""Budgets: the seam, holds, the day, session and request accounting, limits, and what a client
sees of usage and cost."""
