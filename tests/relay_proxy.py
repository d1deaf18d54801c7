"""A loopback HTTP proxy in front of a real server (the BigQuery emulator) for fault and metering tests.

It relays every request unchanged; a subclass may answer a request itself (``intercept``: a 429, a
refused job) or rewrite a relayed answer (``rewrite``: statistics the emulator does not report).
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def send_json(handler: BaseHTTPRequestHandler, status: int, payload: dict) -> None:
    body = json.dumps(payload).encode()
    send(handler, status, body, "application/json")


def send(handler: BaseHTTPRequestHandler, status: int, body: bytes, ctype: str) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", ctype)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


class RelayProxy:
    def __init__(self, target: str, timeout: float = 120):
        self.target, self.timeout = target, timeout
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _relay(self):
                length = int(self.headers.get("Content-Length") or 0)
                data = self.rfile.read(length) if length else None
                answer = outer.intercept(self, data)
                if answer is not None:
                    send_json(self, *answer)
                    return
                status, body, ctype = outer.forward(self, data)
                send(self, status, outer.rewrite(body, ctype), ctype)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _relay

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def forward(self, handler: BaseHTTPRequestHandler, data: bytes | None) -> tuple[int, bytes, str]:
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in ("host", "content-length")}
        request = urllib.request.Request(self.target + handler.path, data=data, headers=headers, method=handler.command)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as r:
                return r.status, r.read(), r.headers.get("Content-Type", "application/json")
        except urllib.error.HTTPError as e:
            return e.code, e.read(), e.headers.get("Content-Type", "application/json")

    def intercept(self, handler: BaseHTTPRequestHandler, data: bytes | None) -> tuple[int, dict] | None:
        """(status, JSON body) to answer instead of relaying, or None to relay."""
        return None

    def rewrite(self, body: bytes, ctype: str) -> bytes:
        return body

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
