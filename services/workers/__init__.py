"""Workers: one durable consumer per kind, each on its own subject, so kinds scale apart."""
