"""A test server's HTTP plumbing: a ThreadingHTTPServer on a free loopback port, served from a daemon
thread for the length of a ``with`` block; the server classes (tests/*_loopback.py) write only their
protocol's handler."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
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


@contextmanager
def serving(server: ThreadingHTTPServer) -> Iterator[ThreadingHTTPServer]:
    """``server`` answering from a daemon thread for the length of the ``with`` block, then shut and joined."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that logs nothing and answers a whole text body with its length."""

    def log_message(self, *args: Any) -> None:  # keep test output clean
        pass

    def _send(self, status: int, body: str, content_type: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class JsonHandler(QuietHandler):
    """A quiet request handler whose answers are JSON (``content_type`` its Content-Type)."""

    content_type = "application/json"

    def _json(self, status: int, body: Any) -> None:
        self._send(status, json.dumps(body), self.content_type)
