"""Conformance inputs of the serving-metrics sources: a recorded ``/metrics`` history and a Prometheus server.

Both hold the demo's vLLM counters (simulator/demo_serving.py writes them in vLLM's own names, types and
labels) over the 14 hours before the current one.
"""

from __future__ import annotations

import atexit
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gpufinops.simulator import demo_serving
from tests.prometheus_fixture import PROMETHEUS, PROMTOOL, PrometheusServer


def _start() -> datetime:
    return datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=14)


def serving_exporter_input(tmp: Path) -> tuple[dict, datetime]:
    start = _start()
    text = demo_serving.exposition(demo_serving.SERVERS[0], "node-a", start, start + timedelta(hours=13), seed=1)
    (tmp / "vllm.prom").write_text(text)
    return {"targets": [str(tmp / "*.prom")]}, start


def prometheus_serving_input(tmp: Path) -> tuple[dict, datetime]:
    if PROMETHEUS is None or PROMTOOL is None:
        pytest.skip("the `prometheus` and `promtool` binaries are not installed (Debian package `prometheus`)")
    start = _start()
    text = demo_serving.exposition(demo_serving.SERVERS[0], "node-a", start, start + timedelta(hours=13), seed=1)
    lines = []
    for line in text.splitlines():  # OpenMetrics: timestamps in seconds, counters' families without _total
        if line.startswith("# TYPE"):
            _, _, name, kind = line.split()
            lines.append(f"# TYPE {name.removesuffix('_total')} {'counter' if kind == 'counter' else 'unknown'}")
            continue
        series, value, ms = line.rsplit(" ", 2)
        lines.append(f"{series} {value} {int(ms) / 1000:.3f}")
    server = PrometheusServer(tmp / "prometheus", "\n".join(lines) + "\n", [])
    atexit.register(server.stop)
    server.wait_ready()
    return {"url": server.url, "backfill_days": 1}, start
