"""AKS attribution end to end: an AKS node's DCGM exporter, scraped over HTTP on loopback, and the Cost
Management FocusCost rows of its scale-set instance find each other, in either arrival order.

Azure bills a scale set's instances under the scale set's ResourceId, the instance in ``x_SkuDetails``'
``VMName`` (``aks-gpupool-12345678-vmss_1``); the node's series carry its Kubernetes providerID
(``azure:///subscriptions/…/virtualMachineScaleSets/aks-gpupool-12345678-vmss/virtualMachines/1``, the label a
Prometheus node role relabels onto them) and its name as ``Hostname`` (``aks-gpupool-12345678-vmss000001``).
``azure_cost_export`` gives the instance's lines the instance's ARM id, and attribution maps the providerID to
it: no ``resource_map``. A FOCUS 1.2 run that bills the instance under its own ARM id (in Azure's mixed case)
meets the node the same way. The FocusCost rows are generated in the export's documented shape
(tests/azure_focuscost_data.py: no public FocusCost rows with GPU VMs exist).
"""

from __future__ import annotations

import threading
from datetime import timedelta
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gpufinops.ingest.core.registry import default_registry
from gpufinops.ingest.core.runner import run_source
from gpufinops.ingest.metrics import metrics_attribution
from gpufinops.models.run import analyse
from gpufinops.warehouse import db
from tests import azure_focuscost_data as azure
from tests.conftest import query

REGISTRY = default_registry()
SUB = azure.SUBSCRIPTION
NODE_RG = "MC_ml-rg_gpu-aks_eastus"  # as AKS names it: mixed case in the providerID, lower case in the bill
DAYS = 3


def provider_id(instance: int) -> str:
    return (
        f"azure:///subscriptions/{SUB}/resourceGroups/{NODE_RG}/providers/Microsoft.Compute/"
        f"virtualMachineScaleSets/aks-gpupool-12345678-vmss/virtualMachines/{instance}"
    )


def node_exposition(instance: int, busy: bool) -> str:
    """An AKS node's dcgm-exporter /metrics history (2 GPUs, every 15 minutes of DAYS days of October)."""
    host = f"aks-gpupool-12345678-vmss{instance:06d}"
    start = azure.month_days("2026-10", 1)[0]
    lines = ["# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).", "# TYPE DCGM_FI_DEV_GPU_UTIL gauge"]
    for step in range(DAYS * 24 * 4):
        ms = int((start + timedelta(minutes=15 * step)).timestamp() * 1000)
        for gpu in range(2):
            labels = (
                f'gpu="{gpu}",UUID="GPU-{instance:04d}{gpu:04d}-0000-0000-0000-000000000000",device="nvidia{gpu}",'
                f'modelName="NVIDIA A100 80GB PCIe",Hostname="{host}",provider_id="{provider_id(instance)}",'
                f'label_kubernetes_azure_com_agentpool="gpupool",label_kubernetes_azure_com_cluster="{NODE_RG}"'
            )
            lines.append(f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} {80 if busy else 0} {ms}")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def exporters():
    """Two AKS nodes' exporters on loopback: instance 0 busy, instance 1 idle."""
    bodies = {f"/node{i}/metrics": node_exposition(i, busy=i == 0).encode() for i in (0, 1)}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            body = bodies.get(self.path)
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield [f"http://127.0.0.1:{server.server_address[1]}{path}" for path in sorted(bodies)]
    server.shutdown()
    server.server_close()


def _feed(warehouse: Path, container: Path, targets: list[str], order: tuple[str, ...]) -> None:
    for step in order:
        if step == "metrics":
            result = run_source(REGISTRY, warehouse, "dcgm", "dcgm_exporter", {"targets": targets})
        else:
            result = run_source(
                REGISTRY, warehouse, "azure", "azure_cost_export", {"path": str(container)}, team_tag_keys=("team",)
            )
        assert result.status == "succeeded", (step, result.error)


def instance_rows(version: str) -> list[dict[str, str]]:
    """The pool's rows as ``version`` bills them: 1.0r2 to the scale set, its instance in x_SkuDetails' VMName;
    FOCUS 1.2 (no x_SkuDetails) to the instance's own ARM id, in Azure's case
    (``…/virtualMachineScaleSets/aks-gpupool-12345678-vmss/virtualMachines/1``)."""
    rows = azure.aks_rows(version, days=DAYS)
    if version == "1.0r2":
        return rows
    for n, row in enumerate(rows):  # aks_rows writes instance 0's days, then instance 1's
        row["ResourceId"] = provider_id(n // DAYS).removeprefix("azure://")
        row["ResourceName"] = str(n // DAYS)
    return rows


@pytest.mark.parametrize("version", ["1.0r2", "1.2"])
@pytest.mark.parametrize("order", [("metrics", "bill"), ("bill", "metrics")])
def test_an_aks_node_and_its_scale_set_instance_bill_find_each_other(exporters, tmp_path, order, version):
    container = tmp_path / "container"
    azure.write_run(container, "2026-10", instance_rows(version), version=version)
    warehouse = tmp_path / "wh" / "gpufinops.duckdb"
    _feed(warehouse, container, exporters, order)
    instance = f"{azure.AKS_VMSS}/virtualmachines/{{}}"
    rows = query(warehouse, "SELECT host, resource_id, team, count(*) FROM gpu_metrics_hourly GROUP BY ALL ORDER BY 1")
    assert rows == [(f"aks-gpupool-12345678-vmss{i:06d}", instance.format(i), "recsys", DAYS * 24 * 2) for i in (0, 1)]
    billed = query(
        warehouse,
        'SELECT "ResourceId", count(*), sum("EffectiveCost"), max("x_GpuCount") FROM cost_line_items '
        "GROUP BY 1 ORDER BY 1",
    )
    day = azure.AKS_HOURLY * 24
    assert billed == [(instance.format(i), DAYS * 24, day * DAYS, 2) for i in (0, 1)]
    with db.writer(warehouse) as con:
        recs = [r for r in analyse(con).recommendations if r.kind == "idle_gpu"]
    assert [(r.resource_id, r.team, r.evidence["idle_cost_usd"]) for r in recs] == [
        (
            instance.format(1),
            "recsys",
            (day * DAYS).quantize(Decimal("0.01")),
        )  # the idle node, priced by its own instance's lines
    ]


def test_scale_set_rows_without_their_instance_keep_the_scale_sets_id(tmp_path):
    """A scale-set row whose VMName names another scale set, and a 1.2 run (no x_SkuDetails), stay on the scale set."""
    rows = azure.aks_rows("1.0r2", days=1, instances=1)
    rows[0]["x_SkuDetails"] = rows[0]["x_SkuDetails"].replace(
        "aks-gpupool-12345678-vmss_0", "aks-other-87654321-vmss_0"
    )
    azure.write_run(tmp_path / "c", "2026-10", rows, version="1.0r2", parts=1)
    azure.write_run(tmp_path / "c", "2026-09", azure.aks_rows("1.2", "2026-09", days=1), version="1.2", parts=1)
    warehouse = tmp_path / "wh" / "gpufinops.duckdb"
    result = run_source(REGISTRY, warehouse, "azure", "azure_cost_export", {"path": str(tmp_path / "c")})
    assert result.status == "succeeded", result.error
    assert query(warehouse, 'SELECT DISTINCT "ResourceId" FROM cost_line_items') == [(azure.AKS_VMSS,)]


def test_provider_id_resource_reads_an_aks_providerid_as_the_bills_arm_id():
    assert metrics_attribution.provider_id_resource(provider_id(3)) == f"{azure.AKS_VMSS}/virtualmachines/3"
    assert metrics_attribution.provider_id_resource("azure:///") is None
