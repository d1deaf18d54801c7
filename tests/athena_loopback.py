"""A loopback front for moto's Athena that behaves like the real service where moto does not.

moto's Athena runs no SQL and returns every result row on one page; real Athena pages
``GetQueryResults`` (at most 1,000 rows, the header row first on the first page only). This proxy
forwards every request to a real moto server unchanged, except that it cuts ``GetQueryResults``
into pages of ``page_size`` rows with ``NextToken``s, and it can act on a query as it starts
(cancel it through the real ``StopQueryExecution``, or mark it failed — moto has no way to make a
query fail, so that one state is set on moto's in-process backend, and the tests say so).
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from tests.conftest import free_port
from tests.http_loopback import QuietHandler


class AthenaProxy:
    def __init__(self, moto_endpoint: str, page_size: int = 1000) -> None:
        self.moto = urlsplit(moto_endpoint)
        self.page_size = page_size
        self.on_start: Callable[[str], None] | None = None
        self.result_calls = 0
        self.port = free_port()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> AthenaProxy:
        proxy = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                target = self.headers.get("X-Amz-Target", "")
                if target.endswith("GetQueryResults"):
                    status, headers, payload = proxy._paged_results(self.headers, body)
                else:
                    status, headers, payload = proxy._forward(self.command, self.path, self.headers, body)
                    if target.endswith("StartQueryExecution") and status == 200 and proxy.on_start:
                        proxy.on_start(json.loads(payload)["QueryExecutionId"])
                self.send_response(status)
                for name, value in headers:
                    if name.lower() not in ("content-length", "transfer-encoding", "connection", "server", "date"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST  # noqa: N815

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _forward(self, method: str, path: str, headers, body: bytes) -> tuple[int, list, bytes]:
        conn = http.client.HTTPConnection(self.moto.netloc, timeout=30)  # host:port
        try:
            conn.request(
                method,
                path,
                body=body,
                headers={k: v for k, v in headers.items() if k.lower() not in ("host", "content-length")},
            )
            response = conn.getresponse()
            return response.status, response.getheaders(), response.read()
        finally:
            conn.close()

    def _paged_results(self, headers, body: bytes) -> tuple[int, list, bytes]:
        self.result_calls += 1
        request = json.loads(body or b"{}")
        token = request.pop("NextToken", None)
        request.pop("MaxResults", None)
        status, response_headers, payload = self._forward("POST", "/", headers, json.dumps(request).encode())
        if status != 200:
            return status, response_headers, payload
        result = json.loads(payload)
        rows = result["ResultSet"]["Rows"]
        start = int(token or 0)
        end = start + self.page_size
        result["ResultSet"]["Rows"] = rows[start:end]
        if end < len(rows):
            result["NextToken"] = str(end)
        return 200, response_headers, json.dumps(result).encode()


def queue_results(moto_endpoint: str, results: list[tuple[list[str], list[list[str | None]]]]) -> None:
    """Queue the rows moto's Athena returns for the next queries, header row first, as Athena does."""
    import urllib.request

    payload = {
        "results": [
            {
                "rows": [{"Data": [{"VarCharValue": c} for c in header]}]
                + [{"Data": [{} if v is None else {"VarCharValue": v} for v in row]} for row in rows],
                "column_info": [
                    {
                        "Name": c,
                        "Label": c,
                        "Type": "varchar",
                        "CatalogName": "hive",
                        "SchemaName": "",
                        "TableName": "",
                        "Precision": 0,
                        "Scale": 0,
                        "Nullable": "UNKNOWN",
                        "CaseSensitive": True,
                    }
                    for c in header
                ],
            }
            for header, rows in results
        ]
    }
    request = urllib.request.Request(
        f"{moto_endpoint}/moto-api/static/athena/query-results",
        data=json.dumps(payload).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    assert urllib.request.urlopen(request, timeout=10).status == 201


def set_execution_polls(moto_endpoint: str, polls: int | None) -> None:
    """Make each moto Athena execution stay QUEUED, then RUNNING, for ``polls`` status calls (None: immediate)."""
    import urllib.request

    payload: dict[str, Any]
    if polls is None:
        url, payload = "unset-transition", {"model_name": "athena::execution"}
    else:
        url, payload = (
            "set-transition",
            {"model_name": "athena::execution", "transition": {"progression": "manual", "times": polls}},
        )
    request = urllib.request.Request(
        f"{moto_endpoint}/moto-api/state-manager/{url}",
        data=json.dumps(payload).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    urllib.request.urlopen(request, timeout=10).read()
