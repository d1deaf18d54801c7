"""Unit costs on AKS end to end: an AKS GPU node's FocusCost lines (billed to its scale set, the instance in
``x_SkuDetails``' ``VMName``), the node's DCGM exporter and a vLLM pod's ``/metrics`` on that node, each loaded by
its own source over loopback (``azure_cost_export`` from a folder, ``dcgm_exporter`` and ``serving_exporter``
over HTTP), then ``gpufinops unit-costs`` as a user runs it.

The FocusCost rows are generated in the export's documented shape (tests/azure_focuscost_data.py: no public
FocusCost rows with GPU VMs exist); the vLLM counters are the demo's, in vLLM's own names (simulator/
demo_serving.py). The expected figures are worked here from the loaded inputs by the documented rules
(docs/unit-costs.md: one pod on a node without workload labels is charged the node's whole hour; its input share
is its prefill time over prefill and decode time), never read back from the code under test.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gpufinops.ingest.core.registry import default_registry
from gpufinops.ingest.core.runner import run_source
from gpufinops.simulator import demo_serving
from tests import azure_focuscost_data as azure
from tests.conftest import query
from tests.test_aks_attribution import DAYS, node_exposition

REGISTRY = default_registry()
NODE = "aks-gpupool-12345678-vmss000000"  # the scale set's instance 0, as AKS names its node
INSTANCE = f"{azure.AKS_VMSS}/virtualmachines/0"
START = datetime(2026, 10, 1, tzinfo=UTC)
SERVED_HOURS = 6
CENT = Decimal("0.01")


@pytest.fixture(scope="module")
def aks(tmp_path_factory):
    """The node's bill, its DCGM exporter and its vLLM pod, loaded into one warehouse."""
    root = tmp_path_factory.mktemp("aks-unit-costs")
    vllm = demo_serving.SERVERS[0]
    bodies = {
        "/dcgm/metrics": node_exposition(0, busy=True).encode(),
        "/vllm/metrics": demo_serving.exposition(
            vllm, NODE, START, START + timedelta(hours=SERVED_HOURS), seed=7
        ).encode(),
    }

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            body = bodies.get(self.path, b"")
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    azure.write_run(root / "bill", "2026-10", azure.aks_rows("1.0r2", days=DAYS, instances=1), version="1.0r2")
    warehouse = root / "wh" / "gpufinops.duckdb"
    try:
        for name, source_type, options, extra in (
            ("azure", "azure_cost_export", {"path": str(root / "bill")}, {"team_tag_keys": ("team",)}),
            ("dcgm", "dcgm_exporter", {"targets": [f"{url}/dcgm/metrics"]}, {}),
            ("vllm", "serving_exporter", {"targets": [f"{url}/vllm/metrics"]}, {}),
        ):
            result = run_source(REGISTRY, warehouse, name, source_type, options, **extra)
            assert result.status == "succeeded", (source_type, result.error)
    finally:
        server.shutdown()
        server.server_close()
    return warehouse, vllm.model


def _cents(value) -> Decimal:
    return Decimal(str(value)).quantize(CENT, rounding=ROUND_HALF_UP)


def _expected(warehouse) -> dict[str, Decimal]:
    """The rules by hand over what the sources loaded: each served hour is charged the node's hour on the bill
    (the day's line spread into 24 equal hours), its input share prefill / (prefill + decode) seconds."""
    hourly = azure.AKS_HOURLY  # 7.346 × 24 a day, spread: 7.346 an hour
    rows = query(
        warehouse,
        "SELECT hour, input_tokens, output_tokens, requests, prefill_seconds, decode_seconds "
        "FROM serving_metrics_hourly WHERE host = ? ORDER BY hour",
        [NODE],
    )
    assert len(rows) >= SERVED_HOURS - 1, rows  # the counters' increase per hour, the first hour's start aside
    cost = input_cost = i = o = r = Decimal(0)
    for _hour, inputs, outputs, requests, prefill, decode in rows:
        cost += hourly
        input_cost += hourly * Decimal(str(prefill)) / (Decimal(str(prefill)) + Decimal(str(decode)))
        i, o, r = i + Decimal(str(inputs)), o + Decimal(str(outputs)), r + Decimal(str(requests))
    return {
        "gpu_cost_usd": cost,
        "usd_per_1m_input_tokens": input_cost * 10**6 / i,
        "usd_per_1m_output_tokens": (cost - input_cost) * 10**6 / o,
        "usd_per_1k_requests": cost * 1000 / r,
    }


def _unit_costs(warehouse, *args: str) -> list[dict]:
    done = subprocess.run(
        [sys.executable, "-m", "gpufinops.interfaces.cli", "--db", str(warehouse), "unit-costs", "--format", "json"]
        + list(args),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_pod_s_gpu_hours_are_the_aks_node_s_scale_set_instance(aks):
    warehouse, _ = aks
    assert query(warehouse, "SELECT DISTINCT resource_id, team FROM gpu_metrics_hourly WHERE host = ?", [NODE]) == [
        (INSTANCE, "recsys")
    ]
    assert query(warehouse, 'SELECT DISTINCT "ResourceId" FROM cost_line_items') == [(INSTANCE,)]


def test_gpufinops_unit_costs_prices_tokens_on_an_aks_node_from_its_own_bill_lines(aks):
    warehouse, model = aks
    want = _expected(warehouse)
    got = {r["model"]: r for r in _unit_costs(warehouse, "--from", "2026-10-01", "--to", "2026-10-01")}
    assert set(got) == {model}
    for column, value in want.items():
        assert _cents(got[model][column]) == _cents(value), (column, got[model][column], value)
    teams = _unit_costs(warehouse, "--by", "team", "--from", "2026-10-01", "--to", "2026-10-01")
    assert [(t["team"], _cents(t["gpu_cost_usd"])) for t in teams] == [("recsys", _cents(want["gpu_cost_usd"]))]
