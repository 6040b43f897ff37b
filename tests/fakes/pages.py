"""A small page server for the freshness check, reachable under two host names (127.0.0.1 and
localhost) so one server gives two distinct domains:

- `/live`     answers HEAD and GET with 200;
- `/no-head`  refuses HEAD with 405 but answers GET with 200;
- `/gone`     answers 404; anything else 404 too.
HEAD responses carry no body, as HTTP says."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

PAGE = b"<html><head><title>A page</title></head><body>Fresh content.</body></html>"


class PageServer:
    def __init__(self) -> None:
        self.hits: list[tuple[str, str, str]] = []  # (method, host, path)
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def start(self) -> Self:
        pages = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _status(self) -> int:
                path = self.path.split("?")[0]
                with pages._lock:
                    pages.hits.append((self.command, self.headers.get("host", ""), path))
                if path == "/live":
                    return 200
                if path == "/no-head":
                    return 405 if self.command == "HEAD" else 200
                return 404

            def _reply(self) -> None:
                status = self._status()
                body = PAGE if status == 200 else b"not here"
                self.send_response(status)
                self.send_header("content-type", "text/html")
                self.send_header("content-length", str(len(body)))
                if status == 405:
                    self.send_header("allow", "GET")
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_HEAD = _reply

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
