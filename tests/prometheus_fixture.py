"""Real servers on loopback for the utilisation tests: a DCGM ``/metrics`` endpoint and Prometheus.

``ExporterServer`` serves exposition bodies by path (optionally failing the first requests, or
stalling, to test retries and timeouts). ``PrometheusServer`` runs the Debian package's
``prometheus`` on a free loopback port with its own config and a temporary TSDB, backfilled with
``promtool tsdb create-blocks-from openmetrics``, scraping the given targets every second.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
import urllib.request
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from tests import cli_process
from tests.conftest import free_port
from tests.http_loopback import QuietHandler

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
requires_prometheus = pytest.mark.skipif(
    PROMETHEUS is None or PROMTOOL is None,
    reason="the `prometheus` and `promtool` binaries are not installed (Debian package `prometheus`; .ci/run installs it)",
)


class ExporterServer:
    """A loopback HTTP server answering GET <path> with a registered body (text/plain; version=0.0.4)."""

    def __init__(self) -> None:
        self.bodies: dict[str, str] = {}
        self.fail_first: dict[str, int] = {}  # path -> requests to answer 503 first
        self.stall_s: dict[str, float] = {}  # path -> seconds to wait before answering
        self.requests: list[str] = []
        outer = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:  # noqa: N802
                outer.requests.append(self.path)
                if outer.stall_s.get(self.path):
                    time.sleep(outer.stall_s[self.path])
                if outer.fail_first.get(self.path, 0) > 0:
                    outer.fail_first[self.path] -= 1
                    self.send_error(503, "exporter starting")
                    return
                body = outer.bodies.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                self._send(200, body, "text/plain; version=0.0.4; charset=utf-8")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def __enter__(self) -> ExporterServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


class PrometheusServer:
    def __init__(self, workdir: Path, openmetrics: str, scrape_targets: list[str]) -> None:
        if PROMETHEUS is None or PROMTOOL is None:  # the tests that start one skip without them
            raise RuntimeError("prometheus and promtool are not on PATH")
        self.workdir = workdir
        self.tsdb = workdir / "tsdb"
        self.tsdb.mkdir(parents=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        history = workdir / "history.om"
        history.write_text(openmetrics + "# EOF\n")
        subprocess.run(
            [PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", "--quiet", str(history), str(self.tsdb)],
            check=True,
            capture_output=True,
            timeout=120,
        )
        config = workdir / "prometheus.yml"
        targets = json.dumps(scrape_targets)
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n"
            f"  - job_name: dcgm\n    static_configs:\n      - targets: {targets}\n"
        )
        self.log = open(workdir / "prometheus.log", "wb")
        self.process = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={config}",
                f"--storage.tsdb.path={self.tsdb}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=100y",
                "--web.enable-lifecycle",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"prometheus exited: {(self.workdir / 'prometheus.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise TimeoutError("prometheus did not become ready")

    def wait_scraped(self, timeout_s: float = 60) -> None:
        """Until every target is up and its first scrape is queryable (the first takes a few seconds)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            targets = _get_json(f"{self.url}/api/v1/targets")["data"]["activeTargets"]
            if targets and all(t["health"] == "up" for t in targets):
                result = _get_json(f"{self.url}/api/v1/query?query=up")["data"]["result"]
                if result:
                    return
            time.sleep(0.25)
        raise TimeoutError("prometheus did not scrape its targets")

    def stop(self) -> None:
        cli_process.terminate(self.process, 20)
        self.log.close()
