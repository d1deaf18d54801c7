"""A loopback server speaking the Compute Engine (v1) and Cloud Storage (JSON API v1) REST protocols for the
GCP storage inventory: aggregated instances and disks, snapshots, and objects of buckets, paginated
(``pageToken`` / ``nextPageToken``), 404 for an unknown bucket. The test owns ``state`` and changes it
between inventories (a VM deleted, its disk left). Every request is recorded."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from tests.http_loopback import JsonHandler

PAGE = 2  # objects (and aggregated zones' items) per page: every listing pages


def _page(items: list, token: str | None) -> tuple[list, str | None]:
    start = int(token or 0)
    nxt = start + PAGE
    return items[start:nxt], (str(nxt) if nxt < len(items) else None)


class Server:
    def __init__(self) -> None:
        self.state: dict[str, Any] = {"instances": {}, "disks": {}, "snapshots": [], "buckets": {}}
        self.requests: list[str] = []
        # a path fragment (``/aggregated/disks``, ``/snapshots``) -> the answer every such request gets
        # instead (a 503, a page whose nextPageToken never changes): what a hostile server answers
        self.answers: dict[str, tuple[int, dict]] = {}


@contextlib.contextmanager
def serve() -> Iterator[tuple[str, Server]]:
    server = Server()

    class Handler(JsonHandler):
        def do_GET(self) -> None:  # noqa: N802
            url = urlparse(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            server.requests.append(self.path)
            parts = url.path.strip("/").split("/")
            token = query.get("pageToken")
            planted = next((a for fragment, a in server.answers.items() if fragment in url.path), None)
            if planted is not None:
                return self._json(*planted)
            if parts[:2] == ["compute", "v1"] and parts[4:5] == ["aggregated"]:
                what = parts[5]
                zones = sorted(server.state[what])
                chunk, nxt = _page(zones, token)
                items = {f"zones/{z}": {what: server.state[what][z]} for z in chunk}
                return self._json(200, {"items": items, **({"nextPageToken": nxt} if nxt else {})})
            if parts[:2] == ["compute", "v1"] and parts[-1] == "snapshots":
                chunk, nxt = _page(server.state["snapshots"], token)
                return self._json(200, {"items": chunk, **({"nextPageToken": nxt} if nxt else {})})
            if parts[:3] == ["storage", "v1", "b"] and parts[4:5] == ["o"]:
                bucket = parts[3]
                if bucket not in server.state["buckets"]:
                    return self._json(404, {"error": {"code": 404, "message": "The specified bucket does not exist."}})
                objects = [o for o in server.state["buckets"][bucket] if o["name"].startswith(query.get("prefix", ""))]
                chunk, nxt = _page(objects, token)
                return self._json(
                    200, {"kind": "storage#objects", "items": chunk, **({"nextPageToken": nxt} if nxt else {})}
                )
            return self._json(404, {"error": {"code": 404, "message": f"no route {url.path}"}})

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", server
    finally:
        httpd.shutdown()
        httpd.server_close()
