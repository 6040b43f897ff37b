"""A tiny web site for the browser tests: HTML pages at paths the test gives, served with
`text/html` over real HTTP on 127.0.0.1. Every request's path is recorded."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class FakeSite:
    def __init__(self) -> None:
        self.pages: dict[str, str] = {}
        self.hits: list[str] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def page(self, path: str, html: str) -> str:
        """Serve `html` at `path`; returns the page's URL."""
        self.pages[path] = html
        return self.url + path

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> Self:
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                with site._lock:
                    site.hits.append(path)
                html = site.pages.get(path)
                status = 200 if html is not None else 404
                body = (html if html is not None else "<h1>Not found</h1>").encode()
                self.send_response(status)
                self.send_header("content-type", "text/html; charset=utf-8")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
