"""The WebSocket surface at `/ws`: Sidekick's event frames and the seeds' legacy protocol.

`endpoint.py` reads a socket's frames and says them into a session through the core;
`connection.py` is one socket and its send buffer; `frames.py` how a request's stream, question
and end look to an event client and to a legacy one; `replay.py` what a socket missed."""
