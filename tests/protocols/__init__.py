"""The public protocols on live services: the seed clients, the workflows API, /v1, A2A and
AG-UI."""
