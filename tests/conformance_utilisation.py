"""Conformance inputs for the utilisation ingestors (used by tests/test_conformance.py's FIXTURES)."""

from __future__ import annotations

import atexit
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests import gpu_series as gs
from tests.prometheus_fixture import PROMETHEUS, PROMTOOL, PrometheusServer


def dcgm_exporter_input(tmp: Path) -> tuple[dict, datetime]:
    (tmp / "node.prom").write_text(gs.exposition(gs.samples()))
    return {"targets": [str(tmp / "*.prom")], "resource_map": gs.RESOURCE_MAP}, gs.START


def prometheus_input(tmp: Path) -> tuple[dict, datetime]:
    if PROMETHEUS is None or PROMTOOL is None:
        pytest.skip("the `prometheus` and `promtool` binaries are not installed (Debian package `prometheus`)")
    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=14)
    server = PrometheusServer(tmp / "prometheus", gs.openmetrics(gs.samples(start)), [])
    atexit.register(server.stop)
    server.wait_ready()
    return {"url": server.url, "resource_map": gs.RESOURCE_MAP, "backfill_days": 1}, start
