"""The walls, attacked: NATS users, forged and poison messages, the gateway's input, egress,
secrets, the sandbox."""
