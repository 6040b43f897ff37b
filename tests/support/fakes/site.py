"""A tiny web site for the browser tests: HTML pages at paths the test gives, served with
`text/html` over real HTTP on 127.0.0.1. Every request's path is recorded."""

from __future__ import annotations

from tests.support.fakes.http import FakeServer, Recorded, Response


class FakeSite(FakeServer):
    def __init__(self) -> None:
        super().__init__()
        self.pages: dict[str, str] = {}
        self.fallback = self._page

    def page(self, path: str, html: str) -> str:
        """Serve `html` at `path`; returns the page's URL."""
        self.pages[path] = html
        return self.url + path

    @property
    def hits(self) -> list[str]:
        """Paths requested, in order."""
        with self._lock:
            return [r.path.split("?")[0] for r in self.requests]

    def _page(self, rec: Recorded) -> Response:
        html = self.pages.get(rec.path.split("?")[0])
        return Response(
            200 if html is not None else 404,
            (html if html is not None else "<h1>Not found</h1>").encode(),
            content_type="text/html; charset=utf-8",
        )
