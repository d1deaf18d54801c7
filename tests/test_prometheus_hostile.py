"""Prometheus sources against a server that answers ``{"status": "success"}`` and no ``data``: the run
fails with one sentence naming the source, the server, the API call and the query (it read
``KeyError: 'data'``), and nothing is loaded. A real HTTP server on loopback answers every request."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gpufinops.ingest.core.registry import default_registry
from gpufinops.ingest.core.runner import run_source

REGISTRY = default_registry()


@contextlib.contextmanager
def no_data() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            body = json.dumps({"status": "success"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_POST = do_GET  # noqa: N815

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("source_type", ["prometheus", "prometheus_serving"])
def test_an_answer_without_data_names_the_server_call_and_query(source_type, tmp_path):
    options = {"url": "", "retries": 1}
    if source_type == "prometheus_serving":
        options["backfill_days"] = 1
    with no_data() as url:
        options["url"] = url
        failed = run_source(REGISTRY, tmp_path / "gpufinops.duckdb", "prom", source_type, options)
    assert failed.status == "failed", failed
    assert failed.error.startswith(f"prom: Prometheus at {url}: GET /api/v1/"), failed.error
    assert "answered success without data (none)" in failed.error and "KeyError" not in failed.error, failed.error
