"""``azure_cost_export``: FocusCost export runs from a local folder (always) and from Azurite (where Node.js and
the azurite package are installed), every dataset version and file format, restatement, partial runs.

The rows are generated in the exact documented shape (tests/azure_focuscost_data.py says why: no public FocusCost
rows with GPU VMs exist); each expected figure is the sum of the generated rows' own strings, in Decimal.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from gpufinops.ingest.core.registry import default_registry
from gpufinops.ingest.core.runner import run_source
from gpufinops.warehouse import db
from tests import azure_focuscost_data as az

REGISTRY = default_registry()
TEAM_KEYS = ("team",)
FORMATS = {"1.0": "csv", "1.0r2": "csv.gz", "1.2-preview": "parquet", "1.2": "csv"}


def _load(warehouse: Path, options: dict):
    return run_source(REGISTRY, warehouse, "azure", "azure_cost_export", options, team_tag_keys=TEAM_KEYS)


def _expected(rows: list[dict[str, str]]) -> Decimal:
    return sum((Decimal(r["BilledCost"]) for r in rows), Decimal(0))


def _lines(warehouse: Path) -> list[tuple]:
    with db.writer(warehouse) as con:
        return con.execute(
            "SELECT ResourceId, x_InstanceType, x_GpuModel, x_GpuCount, sum(BilledCost), count(*), any_value(x_Team), "
            "any_value(PricingCategory) FROM cost_line_items GROUP BY ALL ORDER BY 1"
        ).fetchall()


def _total(warehouse: Path) -> Decimal:
    with db.writer(warehouse) as con:
        return con.execute("SELECT sum(BilledCost) FROM cost_line_items").fetchone()[0]


@pytest.mark.parametrize("version", sorted(FORMATS))
def test_every_version_and_format_loads_to_the_cent_with_the_inventory_s_gpus(tmp_path, version):
    rows = az.fleet_rows(version)
    az.write_run(tmp_path / "container", "2026-10", rows, version=version, fmt=FORMATS[version])
    result = _load(tmp_path / "wh.duckdb", {"path": str(tmp_path / "container")})
    assert result.status == "succeeded", result.error
    assert len(rows) == 16 and result.rows == 16 * 24  # each VM day spread into its hours
    assert _total(tmp_path / "wh.duckdb") == _expected(rows) == Decimal("19089.0048")
    h100, a100 = _lines(tmp_path / "wh.duckdb")[1], _lines(tmp_path / "wh.duckdb")[0]
    assert h100[5] == 8 * 24
    assert h100[:4] == (az.H100_VM, "Standard_ND96isr_H100_v5", "H100-SXM", 8)
    assert h100[6:] == ("research", "Standard")
    assert a100[1:4] == ("Standard_NC24ads_A100_v4", "A100-80GB", 1) and a100[7] == "Dynamic"
    with db.writer(tmp_path / "wh.duckdb") as con:
        kept = json.loads(con.execute("SELECT any_value(x_ProviderColumns) FROM cost_line_items").fetchone()[0])
    assert set(kept) == {c for c in az.columns(version) if c.startswith("x_")}  # Microsoft's x_ columns, kept
    assert kept["x_SkuMeterCategory"] == "Virtual Machines" and kept["x_ResourceGroupName"] == "ml-rg"
    if version == "1.2":  # no x_SkuDetails in 1.2: the size came from the SkuMeter column alone
        assert "x_SkuDetails" not in az.columns(version) and "SkuMeter" in az.columns(version)


def test_a_newer_run_of_a_month_restates_it_and_an_older_one_is_ignored(tmp_path):
    container, warehouse = tmp_path / "container", tmp_path / "wh.duckdb"
    first = az.fleet_rows("1.0r2", days=8)
    az.write_run(container, "2026-10", first, run_id="run-1")
    assert _load(warehouse, {"path": str(container)}).status == "succeeded"
    assert _total(warehouse) == _expected(first)
    # the month re-exported with two more days and the A100 line gone
    restated = [r for r in az.fleet_rows("1.0r2", days=10) if r["ResourceId"] == az.H100_VM]
    late = datetime(2026, 10, 11, 6, tzinfo=UTC)
    az.write_run(container, "2026-10", restated, run_id="run-2", submitted=late)
    result = _load(warehouse, {"path": str(container)})
    assert result.status == "succeeded", result.error
    assert _total(warehouse) == _expected(restated) == az.H100_HOURLY * 24 * 10
    assert [line[0] for line in _lines(warehouse)] == [az.H100_VM]
    # a run submitted before the newest one is superseded, and changes nothing
    az.write_run(container, "2026-10", first, run_id="run-0", submitted=datetime(2026, 10, 2, tzinfo=UTC))
    assert _load(warehouse, {"path": str(container)}).status == "skipped"
    assert _total(warehouse) == _expected(restated)


def _tamper(manifest: Path, **changes) -> None:
    doc = json.loads(manifest.read_text())
    doc.update(changes)
    manifest.write_text(json.dumps(doc))


PARTIAL = {
    "rows": ({"dataRowCount": 17}, r"is partial: its blobs hold 16 row\(s\), dataRowCount is 17; not loaded"),
    "blob count": ({"blobCount": 3}, r"is partial: blobCount is 3 but it lists 2 blob\(s\); not loaded"),
    "missing blob": (None, r"is partial: blob exports/.*/part_1_0001.csv it lists is not there \(1 missing\)"),
}


@pytest.mark.parametrize("case", sorted(PARTIAL))
def test_a_partial_run_is_refused_in_one_sentence_and_changes_nothing(tmp_path, case):
    container, warehouse = tmp_path / "container", tmp_path / "wh.duckdb"
    old = az.fleet_rows("1.0r2", month="2026-09")
    az.write_run(container, "2026-09", old, run_id="september")
    assert _load(warehouse, {"path": str(container)}).status == "succeeded"
    manifest = az.write_run(container, "2026-10", az.fleet_rows("1.0r2"), run_id="october")
    changes, message = PARTIAL[case]
    if changes is None:
        next(manifest.parent.glob("part_1_*")).unlink()
    else:
        _tamper(manifest, **changes)
    result = _load(warehouse, {"path": str(container)})
    assert result.status == "failed"
    assert result.error.count(". ") == 0 and "export run october of gpu-focus for 2026-10" in result.error
    import re

    assert re.search(message, result.error), result.error
    assert _total(warehouse) == _expected(old)  # the warehouse as it was


def test_other_datasets_are_skipped_and_an_unknown_version_is_named(tmp_path):
    container, warehouse = tmp_path / "container", tmp_path / "wh.duckdb"
    example = az.MANIFEST_EXAMPLE.read_text()  # Microsoft's own ReservationRecommendations manifest
    (container / "recs" / "run").mkdir(parents=True)
    (container / "recs" / "run" / "manifest.json").write_text(example)
    manifest = az.write_run(container, "2026-10", az.fleet_rows("1.0r2"))
    assert _load(warehouse, {"path": str(container)}).status == "succeeded"
    doc = json.loads(manifest.read_text())
    doc["exportConfig"]["dataVersion"] = "2.0-preview"
    manifest.write_text(json.dumps(doc))
    result = _load(tmp_path / "other.duckdb", {"path": str(container)})
    assert result.status == "failed"
    assert "exportConfig.dataVersion '2.0-preview' is not a FocusCost version this reads" in result.error


def test_hostile_values_name_the_object_row_and_column(tmp_path):
    rows = az.fleet_rows("1.0r2")
    rows[3]["BilledCost"] = "NaN"
    az.write_run(tmp_path / "container", "2026-10", rows, parts=1)
    result = _load(tmp_path / "wh.duckdb", {"path": str(tmp_path / "container")})
    assert result.status == "failed"
    assert "part_0_0001.csv" in result.error and "BilledCost" in result.error and "NaN" in result.error


@pytest.fixture(scope="module")
def azurite(tmp_path_factory):
    from tests.azurite_loopback import Azurite

    server = Azurite(tmp_path_factory.mktemp("azurite"))
    yield server
    server.stop()


def test_an_export_in_blob_storage_loads_to_the_cent_and_its_restatement_replaces_it(tmp_path, azurite, monkeypatch):
    """Azurite on loopback speaks Blob Storage's REST protocol to azure-storage-blob, as the real service does."""
    monkeypatch.setenv("GPUFINOPS_TEST_AZURE_CONN", azurite.connection_string)
    options = {"container": "billing", "prefix": "exports", "connection_string_env": "GPUFINOPS_TEST_AZURE_CONN"}
    first, warehouse = az.fleet_rows("1.2-preview"), tmp_path / "wh.duckdb"
    az.write_run(tmp_path / "c1", "2026-10", first, version="1.2-preview", fmt="parquet", run_id="run-1")
    assert azurite.upload("billing", tmp_path / "c1") == 3  # the manifest and two partitions
    result = _load(warehouse, options)
    assert result.status == "succeeded", result.error
    assert _total(warehouse) == _expected(first) == Decimal("19089.0048")
    assert _lines(warehouse)[1][1:4] == ("Standard_ND96isr_H100_v5", "H100-SXM", 8)
    restated = az.fleet_rows("1.2-preview", days=9)
    late = datetime(2026, 10, 10, 6, tzinfo=UTC)
    az.write_run(
        tmp_path / "c2", "2026-10", restated, version="1.2-preview", fmt="csv.gz", run_id="run-2", submitted=late
    )
    from azure.storage.blob import ContainerClient

    client = ContainerClient.from_connection_string(azurite.connection_string, "billing")
    for path in (p for p in (tmp_path / "c2").rglob("*") if p.is_file()):
        client.upload_blob(path.relative_to(tmp_path / "c2").as_posix(), path.read_bytes())
    assert _load(warehouse, options).status == "succeeded"
    assert _total(warehouse) == _expected(restated) == (az.H100_HOURLY + az.A100_SPOT_HOURLY) * 24 * 9
    # a wrong key is one sentence naming the container, and no secret
    monkeypatch.setenv("GPUFINOPS_TEST_AZURE_CONN", azurite.connection_string.replace("Eby8", "AAAA"))
    failed = _load(tmp_path / "other.duckdb", options)
    assert failed.status == "failed" and "billing" in failed.error and "AccountKey" not in failed.error


def test_a_partition_longer_than_its_listed_size_is_refused_naming_it(tmp_path, azurite, monkeypatch):
    """A partition was downloaded with no bound for the whole body: one that answers more than the listing said
    (it grows by 256 KiB between the listing and the download, a real Put Blob to Azurite on loopback) is now
    refused at its listed size, named, with nothing loaded."""
    from azure.storage.blob import ContainerClient

    from gpufinops.ingest.azure.azure_export_store import BlobStore

    monkeypatch.setenv("GPUFINOPS_TEST_AZURE_CONN", azurite.connection_string)
    options = {"container": "grown", "prefix": "exports", "connection_string_env": "GPUFINOPS_TEST_AZURE_CONN"}
    az.write_run(tmp_path / "c1", "2026-10", az.fleet_rows("1.2-preview"), version="1.2-preview", fmt="parquet")
    assert azurite.upload("grown", tmp_path / "c1") == 3
    client = ContainerClient.from_connection_string(azurite.connection_string, "grown")
    listing, grown = BlobStore.list, []

    def list_then_grow(store):
        objects = listing(store)
        blob = next(o for o in objects if o.key.endswith(".parquet"))
        body = client.download_blob(store.prefix + blob.key).readall()
        client.upload_blob(store.prefix + blob.key, body + b"\0" * (256 * 1024), overwrite=True)
        grown.append(f"{store.name(blob.key)} answered a body longer than its listed size of {len(body)} bytes")
        return objects

    monkeypatch.setattr(BlobStore, "list", list_then_grow)
    result = _load(tmp_path / "wh.duckdb", options)
    assert result.status == "failed", result
    assert f"Blob Storage Get Blob of {grown[0]}; stopped" in result.error, result.error
    assert _total(tmp_path / "wh.duckdb") is None  # nothing loaded


def test_an_idle_nd96isr_h100_v5_is_found_with_its_own_bill_s_dollars_and_eight_h100s(tmp_path):
    from gpufinops.models.run import analyse

    rows, warehouse = az.fleet_rows("1.0r2", days=8), tmp_path / "wh.duckdb"
    az.write_run(tmp_path / "container", "2026-10", rows)
    assert _load(warehouse, {"path": str(tmp_path / "container")}).status == "succeeded"
    az.write_dcgm(tmp_path / "dcgm", "h100-train-01", "NVIDIA H100 80GB HBM3", 8, days=8)  # all eight idle
    metrics = {"targets": [str(tmp_path / "dcgm" / "*.prom")], "resource_map": {"h100-train-01": az.H100_VM}}
    assert run_source(REGISTRY, warehouse, "gpus", "dcgm_exporter", metrics).status == "succeeded"
    with db.writer(warehouse) as con:
        run = analyse(con)
    idle = [r for r in run.recommendations if r.kind == "idle_gpu" and r.resource_id == az.H100_VM]
    assert len(idle) == 1, [(r.kind, r.resource_id) for r in run.recommendations]
    finding = idle[0].to_dict()
    h100_rows = [r for r in rows if r["ResourceId"] == az.H100_VM]
    assert finding["current"]["gpu_count"] == 8 and finding["current"]["gpu_model"] == "H100-SXM"
    # the dollars are the VM's own bill lines: 8 days at $98.32/h, as a month
    billed = _expected(h100_rows)
    assert billed == Decimal("18877.44")
    assert finding["monthly_savings_usd"] > 0
    assert Decimal(str(finding["current"]["monthly_cost_usd"])) == pytest.approx(
        billed / 8 * Decimal("30.4375"), rel=0.02
    )


def test_a_day_spread_into_hours_sums_to_the_day_exactly_and_other_lines_stay_daily(tmp_path):
    day = az.month_days("2026-10", 1)[0]
    odd = az.vm_day("1.0r2", day, az.H100_VM, "Standard_ND96isr_H100_v5", az.H100_HOURLY)
    odd["BilledCost"] = odd["EffectiveCost"] = "1000.01"  # not a multiple of 24 cents: 41.667083... an hour
    disk = az.vm_day("1.0r2", day, az.H100_VM + "-osdisk", "Standard_ND96isr_H100_v5", Decimal("0.5"))
    disk.update(x_SkuMeterCategory="Storage", x_SkuDetails="{}", x_SkuMeterName="P30 LRS Disk", BilledCost="3.21")
    az.write_run(tmp_path / "container", "2026-10", [odd, disk], parts=1)
    warehouse = tmp_path / "wh.duckdb"
    assert _load(warehouse, {"path": str(tmp_path / "container")}).status == "succeeded"
    with db.writer(warehouse) as con:
        hours = con.execute(
            "SELECT count(*), sum(BilledCost), sum(EffectiveCost), sum(PricingQuantity), min(ChargePeriodStart), "
            "max(ChargePeriodEnd), max(ChargePeriodEnd - ChargePeriodStart) FROM cost_line_items WHERE ResourceId = ?",
            [az.H100_VM],
        ).fetchone()
        disk_rows = con.execute(
            "SELECT count(*), sum(BilledCost) FROM cost_line_items WHERE ResourceId = ?", [az.H100_VM + "-osdisk"]
        ).fetchone()
    assert hours[:4] == (24, Decimal("1000.01"), Decimal("1000.01"), Decimal("24"))
    assert (hours[4], hours[5]) == (day, day + timedelta(days=1)) and hours[6] == timedelta(hours=1)
    assert disk_rows == (1, Decimal("3.21"))
