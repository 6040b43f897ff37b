"""A small page server for the freshness check, reachable under two host names (127.0.0.1 and
localhost) so one server gives two distinct domains:

- `/live`     answers HEAD and GET with 200;
- `/no-head`  refuses HEAD with 405 but answers GET with 200;
- `/gone`     answers 404; anything else 404 too.
HEAD responses carry no body, as HTTP says."""

from __future__ import annotations

from tests.support.fakes.http import FakeServer, Recorded, Response

PAGE = b"<html><head><title>A page</title></head><body>Fresh content.</body></html>"


class PageServer(FakeServer):
    def __init__(self) -> None:
        super().__init__()
        self.fallback = self._page

    @property
    def hits(self) -> list[tuple[str, str, str]]:
        """(method, host, path) of every request, in order."""
        with self._lock:
            return [
                (
                    r.method,
                    {k.lower(): v for k, v in r.headers.items()}.get("host", ""),
                    r.path.split("?")[0],
                )
                for r in self.requests
            ]

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    def url(self, path: str, host: str = "127.0.0.1") -> str:  # type: ignore[override]
        return f"http://{host}:{self.port}{path}"

    def _page(self, rec: Recorded) -> Response:
        path = rec.path.split("?")[0]
        if path == "/live":
            status = 200
        elif path == "/no-head":
            status = 405 if rec.method == "HEAD" else 200
        else:
            status = 404
        return Response(
            status,
            PAGE if status == 200 else b"not here",
            {"allow": "GET"} if status == 405 else {},
            content_type="text/html",
        )
