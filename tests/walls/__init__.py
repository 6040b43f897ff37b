"""The walls, attacked: NATS users, forged and poison messages, the gateway's input, egress,
the secrets each process holds, the settings that reach their processes, the sandbox."""
