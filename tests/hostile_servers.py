"""Loopback HTTP servers that misbehave the ways a network does, for tests/test_conformance_network.py.

Each is a real server on 127.0.0.1 speaking HTTP/1.1; what it answers depends on its ``mode``:

- ``cycle`` (``period`` 1, 2 or 3): every answer is a page whose next token repeats with that period
  (A, A, …; A, B, A, …; A, B, C, A, …), in the wire format the request asked in: EC2 and query-protocol
  XML (an ``Action=`` form), S3's ListObjectsV2 XML, AWS JSON (``X-Amz-Target``), CloudWatch's
  RPC v2 CBOR, Google's REST JSON (``nextPageToken``, and BigQuery's ``pageToken``), the Azure Retail Prices
  API's JSON (``NextPageLink``, a URL back to this server), Azure Resource Manager's JSON (``nextLink``, likewise)
  or Blob Storage's List Blobs XML (``NextMarker``);
- ``endless``: 200 and headers, then a valid line every 0.5 s, never the end (no Content-Length);
- ``stall``: 200 and headers (a Content-Length), then nothing;
- ``huge``: 200, then 64 KiB chunks as fast as the client reads them (no Content-Length, 64 MiB in all);
- ``flaky``: 503 to the first request (a load balancer's HTML page), then each request answered by ``upstream`` (a real loopback
  server: forwarded) or from ``files`` (path → bytes; with ``container`` set, as Blob Storage answers List Blobs
  and Get Blob for the files under ``/<container>/``).
"""

from __future__ import annotations

import http.client
import http.server
import json
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

CHUNK = b"#" * 65_536
HUGE_BYTES = 64 * 2**20


def cbor(value: Any) -> bytes:
    """The few CBOR shapes a page needs (RFC 8949): maps, text, lists, booleans, small integers."""

    def head(major: int, n: int) -> bytes:
        if n < 24:
            return bytes([major << 5 | n])
        if n < 256:
            return bytes([major << 5 | 24, n])
        return bytes([major << 5 | 25]) + n.to_bytes(2, "big")

    if isinstance(value, bool):
        return b"\xf5" if value else b"\xf4"
    if isinstance(value, int):
        return head(0, value)
    if isinstance(value, str):
        data = value.encode()
        return head(3, len(data)) + data
    if isinstance(value, list):
        return head(4, len(value)) + b"".join(cbor(v) for v in value)
    if isinstance(value, dict):
        return head(5, len(value)) + b"".join(cbor(k) + cbor(v) for k, v in value.items())
    raise TypeError(type(value))


@dataclass
class Hostile:
    mode: str
    period: int = 1
    upstream: str | None = None
    container: str | None = None
    files: dict[str, bytes] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    url: str = ""
    stop: threading.Event = field(default_factory=threading.Event)

    def token(self) -> str:
        return f"cycle-{(len(self.requests) - 1) % self.period}"


def _page(state: Hostile, method: str, path: str, headers: Any, body: bytes) -> tuple[str, bytes, dict[str, str]]:
    """(content type, body, extra headers) of a page answering ``token`` in the request's own format."""
    token = state.token()
    form = urllib.parse.parse_qs(body.decode("latin-1")) if body else {}
    if "Action" in form:  # EC2 (nextToken at the root) and the query protocol (NextToken in <XResult>)
        action = form["Action"][0]
        xml = (
            f'<?xml version="1.0" encoding="UTF-8"?><{action}Response><requestId>r</requestId>'
            f"<nextToken>{token}</nextToken><{action}Result><NextToken>{token}</NextToken></{action}Result>"
            f"<ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></{action}Response>"
        )
        return "text/xml", xml.encode(), {}
    if "list-type=2" in path:  # S3 ListObjectsV2
        xml = (
            '<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>b</Name><KeyCount>0</KeyCount>'
            f"<IsTruncated>true</IsTruncated><NextContinuationToken>{token}</NextContinuationToken></ListBucketResult>"
        )
        return "application/xml", xml.encode(), {}
    if "comp=list" in path and "restype=container" in path:  # Blob Storage List Blobs
        xml = (
            '<?xml version="1.0" encoding="utf-8"?><EnumerationResults ServiceEndpoint="http://127.0.0.1/" '
            'ContainerName="c"><MaxResults>5000</MaxResults><Blobs /><NextMarker>'
            f"{token}</NextMarker></EnumerationResults>"
        )
        return "application/xml", xml.encode(), {"x-ms-version": "2025-01-05"}
    if "api-version=" in path and "currencyCode=" in path:  # Azure Retail Prices: NextPageLink, the next URL
        base = path.split("&$skip=", 1)[0]
        page = {"BillingCurrency": "USD", "Items": [], "NextPageLink": f"{state.url}{base}&$skip={token}", "Count": 0}
        return "application/json", json.dumps(page).encode(), {}
    if "/subscriptions/" in path and "api-version=" in path:  # Azure Resource Manager: nextLink, the next URL
        base = path.split("&$skipToken=", 1)[0]
        page = {"value": [], "nextLink": f"{state.url}{base}&$skipToken={token}"}
        return "application/json", json.dumps(page).encode(), {}
    if headers.get("smithy-protocol") == "rpc-v2-cbor":
        return "application/cbor", cbor({"NextToken": token}), {"smithy-protocol": "rpc-v2-cbor"}
    if headers.get("X-Amz-Target"):
        return "application/x-amz-json-1.1", json.dumps({"NextToken": token}).encode(), {}
    page = {  # Google REST: a list page (compute, storage, billing), a finished BigQuery job and its rows
        "nextPageToken": token,
        "pageToken": token,
        "kind": "bigquery#getQueryResultsResponse",
        "jobReference": {"projectId": "p", "jobId": "j", "location": "US"},
        "status": {"state": "DONE"},
        "jobComplete": True,
        "totalRows": "1000000",
        "schema": {"fields": [{"name": "x", "type": "STRING"}]},
        "rows": [],
        "status_code": "success",
    }
    return "application/json", json.dumps(page).encode(), {}


class Handler(http.server.BaseHTTPRequestHandler):
    """Answers as its ``state`` says (a subclass per server sets it)."""

    protocol_version = "HTTP/1.1"
    state: Hostile

    def log_message(self, *args: Any) -> None:
        pass

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _answer(self) -> None:
        body = self._body()
        self.state.requests.append(f"{self.command} {self.path}")
        try:
            getattr(self, f"_{self.state.mode}")(body)
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True

    do_GET = do_POST = do_PUT = _answer  # noqa: N815 (http.server's names)

    def _send(self, status: int, content_type: str, body: bytes, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _cycle(self, body: bytes) -> None:
        content_type, page, extra = _page(self.state, self.command, self.path, self.headers, body)
        self._send(200, content_type, page, extra)

    def _open_ended(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def _endless(self, _: bytes) -> None:
        self._open_ended()
        n = 0
        while not self.state.stop.is_set():
            self.wfile.write(f"# HELP still_here line {n}\n".encode())
            self.wfile.flush()
            n += 1
            time.sleep(0.5)

    def _stall(self, _: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "1000")
        self.end_headers()
        self.wfile.flush()
        self.state.stop.wait(60)

    def _huge(self, _: bytes) -> None:
        self._open_ended()
        for _chunk in range(HUGE_BYTES // len(CHUNK)):
            if self.state.stop.is_set():
                break
            self.wfile.write(CHUNK)

    def _flaky(self, body: bytes) -> None:
        if len(self.state.requests) == 1:
            self._send(503, "text/html", b"<html><body>503 Service Unavailable</body></html>", {"Retry-After": "0"})
        elif self.state.upstream:
            self._forward(body)
        elif self.state.container:
            self._blob()
        else:
            path = urllib.parse.urlsplit(self.path).path
            self._send(
                *(200, "text/plain", self.state.files[path]) if path in self.state.files else (404, "text/plain", b"")
            )

    def _blob(self) -> None:
        """Blob Storage's answers (List Blobs, Get Blob with a range) for ``files`` under ``/<container>/``."""
        parts = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(parts.query)
        root = f"/{self.state.container}/"
        if query.get("comp") == ["list"]:
            prefix = query.get("prefix", [""])[0]
            names = sorted(p[len(root) :] for p in self.state.files if p[len(root) :].startswith(prefix))
            blobs = "".join(
                f"<Blob><Name>{n}</Name><Properties><Last-Modified>Mon, 05 Oct 2026 06:00:00 GMT</Last-Modified>"
                f'<Etag>"0x{i:X}"</Etag><Content-Length>{len(self.state.files[root + n])}</Content-Length>'
                f"<BlobType>BlockBlob</BlobType></Properties></Blob>"
                for i, n in enumerate(names)
            )
            xml = f'<?xml version="1.0" encoding="utf-8"?><EnumerationResults><Blobs>{blobs}</Blobs><NextMarker /></EnumerationResults>'
            self._send(200, "application/xml", xml.encode(), {"x-ms-version": "2025-01-05"})
            return
        data = self.state.files.get(urllib.parse.unquote(parts.path))
        if data is None:
            self._send(
                404, "application/xml", b"<Error><Code>BlobNotFound</Code></Error>", {"x-ms-error-code": "BlobNotFound"}
            )
            return
        first, last = 0, len(data) - 1
        wanted = self.headers.get("x-ms-range") or self.headers.get("Range") or ""
        if wanted.startswith("bytes="):
            low, _, high = wanted[6:].partition("-")
            first, last = int(low), min(int(high or last), last)
        headers = {
            "Content-Range": f"bytes {first}-{last}/{len(data)}",
            "ETag": '"0x1"',
            "Last-Modified": "Mon, 05 Oct 2026 06:00:00 GMT",
            "x-ms-blob-type": "BlockBlob",
            "x-ms-version": "2025-01-05",
        }
        self._send(206, "application/octet-stream", data[first : last + 1], headers)

    def _forward(self, body: bytes) -> None:
        assert self.state.upstream
        parts = urllib.parse.urlsplit(self.state.upstream)
        conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        conn.request(self.command, self.path, body=body or None, headers=headers)
        answer = conn.getresponse()
        data = answer.read()
        self.send_response(answer.status)
        for name, value in answer.getheaders():
            if name.lower() not in ("content-length", "transfer-encoding", "connection", "date", "server"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        conn.close()


class serve:  # noqa: N801 (a context manager read as a verb)
    """``with serve(Hostile("stall")) as state:`` a server at ``state.url`` until the block ends."""

    def __init__(self, state: Hostile) -> None:
        self.state = state
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), type("Answering", (Handler,), {"state": state}))
        self.server.daemon_threads = True

    def __enter__(self) -> Hostile:
        self.state.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self.state

    def __exit__(self, *exc: object) -> None:
        self.state.stop.set()
        self.server.shutdown()
        self.server.server_close()
