"""Approvals: the policy, who decides, the gate of the tools, and approvals through every surface
and through failures."""
