"""The approvals queue surface: `/api/approvals`, for a request's principal and operators."""
