"""A tiny threaded HTTP server base for the fakes: real sockets on 127.0.0.1, a free port."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@dataclass
class Response:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    # For streaming: a list of raw chunks written one by one (already framed).
    chunks: list[bytes] | None = None
    chunk_delay: float = 0.0
    content_type: str = "application/json"


Route = Callable[[Recorded], Response]


class _Quiet(ThreadingHTTPServer):
    """A client that hangs up mid-request (a cancelled or timed-out model call) is no error."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FakeServer:
    """Start with `start()` (or `with FakeX() as fake:`); `url` is http://127.0.0.1:PORT. Every
    request is recorded.

    A fake whose handler calls `gate()` can be held: while `held`, each such request sets
    `arrived` and is answered only once `release` is set (a test kills a worker mid-send)."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.routes: dict[tuple[str, str], Route] = {}
        self.fallback: Route | None = None  # answers requests no route matches
        self.held = False
        self.arrived = threading.Event()
        self.release = threading.Event()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def gate(self) -> None:
        if self.held:
            self.arrived.set()
            self.release.wait(60)

    def reset(self) -> None:
        """Forget the requests and open the gate."""
        with self._lock:
            self.requests.clear()
        self.held = False
        self.arrived.clear()
        self.release.clear()

    def route(self, method: str, path: str, handler: Route) -> None:
        self.routes[(method, path)] = handler

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def host_port(self) -> str:
        """`127.0.0.1:PORT`: an entry for SIDEKICK_EGRESS_ALLOW (tools may reach this fake)."""
        return self.url.removeprefix("http://")

    def start(self) -> Self:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                path = self.path.split("?")[0]
                rec = Recorded(self.command, self.path, dict(self.headers.items()), body)
                with fake._lock:
                    fake.requests.append(rec)
                handler = fake.routes.get((self.command, path)) or fake.fallback
                resp = handler(rec) if handler else Response(404, {"error": "not found"})
                self._write(resp)

            def _write(self, resp: Response) -> None:
                try:
                    if resp.chunks is not None:
                        self.send_response(resp.status)
                        self.send_header("content-type", "text/event-stream")
                        self.send_header("cache-control", "no-cache")
                        self.send_header("transfer-encoding", "chunked")
                        for k, v in resp.headers.items():
                            self.send_header(k, v)
                        self.end_headers()
                        for chunk in resp.chunks:
                            self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                            self.wfile.flush()
                            if resp.chunk_delay:
                                time.sleep(resp.chunk_delay)
                        self.wfile.write(b"0\r\n\r\n")
                        self.wfile.flush()
                        return
                    data = (
                        resp.body
                        if isinstance(resp.body, bytes)
                        else json.dumps(resp.body).encode()
                    )
                    self.send_response(resp.status)
                    self.send_header("content-type", resp.content_type)
                    self.send_header("content-length", str(len(data)))
                    for k, v in resp.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    if self.command != "HEAD":  # a HEAD response has no body
                        self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _handle

        self._server = _Quiet(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.release.set()  # nothing stays held
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def calls(self, path: str) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.path.split("?")[0] == path]
