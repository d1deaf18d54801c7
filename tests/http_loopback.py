"""A test server's HTTP plumbing: a ThreadingHTTPServer on a free loopback port, served from a daemon
thread for the length of a ``with`` block; the server classes (tests/*_loopback.py) write only their
protocol's handler."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.conftest import free_port


class LoopbackHttp:
    """Base of a loopback test server: ``serve(Handler)`` in its ``__enter__``; ``url`` its root."""

    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def __exit__(self, *exc) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()


class JsonHandler(BaseHTTPRequestHandler):
    """A quiet request handler whose answers are JSON (``content_type`` its Content-Type)."""

    content_type = "application/json"

    def log_message(self, *args: Any) -> None:  # keep test output clean
        pass

    def _json(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", self.content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
