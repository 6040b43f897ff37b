"""Gateway: the only public entry point, bridging clients onto the bus.

A request enters from a client: a WebSocket frame (`ws.py`), the workflows API
(`workflows.py`), the OpenAI-compatible endpoint (`openai_api.py`); `intake.py` accepts it and
publishes `chat.requested`. It leaves as the client-bound `out.<request>.…` events, which
`hub.py` hands to the socket or HTTP caller that is waiting for them."""
