"""The requests surface: a request's timeline (`/api/requests/{id}/timeline`) and its replay
(`/api/requests/{id}/replay`), for the page, `sidekick inspect` and `sidekick replay`."""
