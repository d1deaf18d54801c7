"""The demo's Azure subscription (simulator/demo_azure.py): its bill is a Cost Management FocusCost 1.0r2 export
in the documented shape (every column of Microsoft's export schema in its order, a manifest.json per run that
counts its blobs and rows), its planted idle GPUs recompute from the files read independently, and the AKS nodes'
DCGM series carry the VMSS instance the bill names in x_SkuDetails."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import duckdb
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpufinops.simulator import demo_azure
from gpufinops.simulator.demo_fleet import generate
from tests.azure_focuscost_data import columns

DAYS = 7


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("demo_azure")
    generate(home, days=DAYS, seed=7)
    return home


@pytest.fixture(scope="module")
def truth(home):
    return json.loads((home / "ground_truth.json").read_text())


@pytest.fixture(scope="module")
def bill(home):
    """Every row of every run the manifests list, read with DuckDB as text (money as exact decimals)."""
    container = home / "exports/azure/cost"
    runs = [json.loads(p.read_text()) for p in sorted(container.rglob("manifest.json"))]
    paths = [str(container / b["blobName"]) for run in runs for b in run["blobs"]]
    con = duckdb.connect()
    con.execute(f"CREATE TABLE bill AS SELECT * FROM read_csv({paths!r}, all_varchar = true, header = true)")
    yield con, runs, paths
    con.close()


def test_each_run_is_a_focuscost_export_with_its_manifest(bill):
    con, runs, paths = bill
    assert [r["runInfo"]["startDate"] for r in runs] == ["2026-10-01T00:00:00"]  # 7 days: October only
    header = open(paths[0], encoding="utf-8").readline().rstrip("\r\n").split(",")
    assert header == columns("1.0r2")  # Microsoft's export schema, every column in its order
    for run in runs:
        assert run["manifestVersion"] == "2024-04-01" and run["exportConfig"]["type"] == "FocusCost"
        assert run["exportConfig"]["dataVersion"] == "1.0r2" and run["blobCount"] == len(run["blobs"])
        assert run["dataRowCount"] == sum(b["dataRowCount"] for b in run["blobs"])
        assert run["blobs"][0]["blobName"].startswith(f"{run['deliveryConfig']['rootFolderPath']}/gpu-focus-cost/")
    assert con.execute("SELECT count(*) FROM bill").fetchone()[0] == sum(r["dataRowCount"] for r in runs)
    spans = con.execute(
        "SELECT DISTINCT CAST(ChargePeriodEnd AS TIMESTAMPTZ) - CAST(ChargePeriodStart AS TIMESTAMPTZ) FROM bill"
    ).fetchall()
    assert [s for (s,) in spans] == [timedelta(days=1)]  # daily, as Cost Management's


def test_the_bill_names_sizes_not_gpus_and_scale_set_instances_in_sku_details(bill, truth):
    con, _, _ = bill
    rows = con.execute("SELECT ResourceId, x_SkuDetails, PricingCategory, Tags FROM bill").fetchall()
    assert "x_GpuCount" not in [c for (c,) in con.execute("SELECT column_name FROM (DESCRIBE bill)").fetchall()]
    machines = {m["host"]: m for m in truth["machines"] if m["provider"] == "azure"}
    for rid, details, pricing, tags in rows:
        sku = json.loads(details)
        host = next(h for h, m in machines.items() if m["vm_name"] == sku["VMName"])
        m = machines[host]
        assert sku["ServiceType"] == m["instance_type"] and rid == m["billed_resource_id"]
        assert pricing == ("Dynamic" if m["pricing"] == "spot" else "Standard")
        if m["provider_id"]:  # an AKS node: billed to the scale set, the instance in VMName, AKS's tags
            assert rid.endswith(f"/virtualmachinescalesets/{demo_azure.VMSS}")
            assert m["resource_id"] == f"{rid}/virtualmachines/{sku['VMName'].rsplit('_', 1)[1]}"
            assert m["provider_id"].lower().removeprefix("azure://") == m["resource_id"]
            assert json.loads(tags)["aks-managed-cluster-name"] == demo_azure.CLUSTER
        else:
            assert m["resource_id"] == rid and rid.endswith(f"/virtualmachines/{host}")


def _idle_hours(home, host: str) -> tuple[set[datetime], set[datetime], dict[str, str]]:
    """(hours with samples, hours every GPU was at most 5 % in every sample, one series' labels)."""
    text = (home / "metrics/dcgm-azure" / f"{host}.prom").read_text()
    util = next(f for f in text_string_to_metric_families(text) if f.name == "DCGM_FI_DEV_GPU_UTIL")
    peak: dict[datetime, float] = defaultdict(float)
    for s in util.samples:
        assert s.labels["Hostname"] == host and s.timestamp is not None
        hour = datetime.fromtimestamp(float(s.timestamp), UTC).replace(minute=0)
        peak[hour] = max(peak[hour], s.value)
    return set(peak), {h for h, v in peak.items() if v <= 5}, util.samples[0].labels


def test_planted_idle_gpus_recompute_from_the_export_and_the_exporter(home, truth, bill):
    con, _, _ = bill
    planted = [p for p in truth["planted"] if p["provider"] == "azure"]
    assert sorted((p["kind"], p["host"]) for p in planted) == [
        ("idle_gpu", "aks-gpupool-31415926-vmss000002"),
        ("idle_gpu", "nlp-nd-h100-01"),
    ]
    machines = {m["host"]: m for m in truth["machines"]}
    for item in planted:
        m = machines[item["host"]]
        daily = con.execute(
            "SELECT sum(CAST(EffectiveCost AS DECIMAL(38,10))), count(*) FROM bill "
            "WHERE ResourceId = ? AND json_extract_string(x_SkuDetails, '$.VMName') = ?",
            [m["billed_resource_id"], m["vm_name"]],
        ).fetchone()
        logged, idle, _ = _idle_hours(home, item["host"])
        assert daily[1] == DAYS and len(logged) == item["billed_hours"] == 24 * DAYS
        assert idle == logged and item["idle_hours"] == len(idle)  # always idle
        assert Decimal(item["idle_cost_usd"]) == Decimal(item["cost_usd"]) == daily[0]
    nd = machines["nlp-nd-h100-01"]
    assert (nd["gpu_count"], nd["gpu_model"]) == (8, "H100-SXM")
    total = con.execute("SELECT sum(CAST(EffectiveCost AS DECIMAL(38,10))) FROM bill").fetchone()[0]
    assert Decimal(truth["cost_by_provider_usd"]["azure"]) == total


def test_aks_nodes_series_carry_their_providerid_and_aks_labels(home, truth):
    for m in (m for m in truth["machines"] if m["provider"] == "azure"):
        logged, idle, labels = _idle_hours(home, m["host"])
        if m["provider_id"]:
            assert labels["provider_id"] == m["provider_id"] and labels["node"] == m["host"]
            assert labels["label_kubernetes_azure_com_agentpool"] == demo_azure.POOL
            assert labels["label_node_kubernetes_io_instance_type"] == m["instance_type"]
            instance = int(m["provider_id"].rsplit("/", 1)[1])
            assert m["host"] == f"{demo_azure.VMSS}{instance:06d}"  # base 36, six digits: the computer name
        else:
            assert "provider_id" not in labels
        if not m["planted"]:
            assert not idle, f"{m['host']} has idle hours but nothing was planted there"


def test_hour_shares_sum_to_the_day_exactly():
    for daily in (Decimal("2359.68"), Decimal("35.2608"), Decimal("0.000000000000007")):
        parts = demo_azure.hour_shares(daily)
        assert len(parts) == 24 and sum(parts) == daily and max(parts) - min(parts) < Decimal("1E-13")
