"""Gateway: the only public entry point. WebSocket `/ws`, health, metrics (and later the
workflows API and web page); bridges clients onto the bus."""
