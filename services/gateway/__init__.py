"""Gateway: the only public entry point, bridging clients onto the bus.

One core (`core/`) and one package per surface over it: the WebSocket with the seeds' legacy
protocol (`ws/`), the workflows API (`workflows/`), the OpenAI-compatible `/v1` (`openai/`),
A2A (`a2a/`), AG-UI (`agui/`), the approvals queue (`approvals/`) and the web page (`page/`).
What a person says on any surface goes through `core/intake.py` (`Intake.say`), which publishes
`chat.requested` or resumes a parked request; the client-bound `out.<session>.<request>.…`
events of the sessions it holds come back through `core/outbound.py` to `core/hub.py`, which
hands them to the socket or HTTP caller waiting for them. `app.py` wires it together. No surface
imports another."""
