"""gcp_price_history: Cyclenerd's real GCP GPU price changes (2022-02 → 2026-07) into price_history / spot_prices."""

from __future__ import annotations

import csv
import os
import shutil
from decimal import ROUND_HALF_EVEN, Decimal

import pytest

from gpufinops.ingest.core.registry import Registry
from gpufinops.ingest.core.runner import run_source
from gpufinops.ingest.gcp.gcp_catalog import GcpCatalog
from gpufinops.ingest.gcp.gcp_price_history import GcpPriceHistory
from tests.conftest import query, table_digest
from tests.gcp_loopback import PRICE_CHANGES, catalog_server

PRICE_COLUMNS = {
    "hour_ondemand_usd": "on_demand",
    "hour_spot_usd": "spot",
    "month_1y_cud_usd": "commit_1y",
    "month_3y_cud_usd": "commit_3y",
}


@pytest.fixture
def registry() -> Registry:
    r = Registry()
    r.register(GcpPriceHistory)
    r.register(GcpCatalog)
    return r


@pytest.fixture
def changes(tmp_path):
    path = tmp_path / PRICE_CHANGES.name
    shutil.copy(PRICE_CHANGES, path)
    return path


def _csv_counts() -> dict[str, int]:
    counts = dict.fromkeys(PRICE_COLUMNS.values(), 0)
    with open(PRICE_CHANGES, newline="") as f:
        for row in csv.DictReader(f):
            for column, pricing in PRICE_COLUMNS.items():
                counts[pricing] += bool(row[column].strip())
    return counts


def test_the_price_history_loads_every_price_once(registry, warehouse, changes):
    result = run_source(registry, warehouse, "gcp_hist", "gcp_price_history", {"path": str(changes)})
    assert result.status == "succeeded", result.error
    expected = _csv_counts()
    assert dict(query(warehouse, "SELECT pricing, count(*) FROM price_history GROUP BY 1")) == expected
    assert query(warehouse, "SELECT count(*), min(product), min(provider) FROM spot_prices")[0] == (
        expected["spot"],
        "compute",
        "gcp",
    )
    assert result.rows == sum(expected.values()) + expected["spot"]
    # a row read back exactly: the first a2-highgpu-1g us-central1 spot price, and a 1-year CUD per hour
    with open(PRICE_CHANGES, newline="") as f:
        row = next(
            r
            for r in csv.DictReader(f)
            if r["machine_type"] == "a2-highgpu-1g" and r["region"] == "us-central1" and r["hour_spot_usd"]
        )
    got = dict(
        query(
            warehouse,
            """SELECT pricing, price FROM price_history WHERE instance_type = 'a2-highgpu-1g'
                                   AND region = 'us-central1' AND effective_from = CAST(? AS TIMESTAMPTZ)""",
            [row["commit_date"]],
        )
    )
    assert got["spot"] == Decimal(row["hour_spot_usd"])
    assert got["commit_1y"] == (Decimal(row["month_1y_cud_usd"]) / 730).quantize(Decimal("1E-8"), ROUND_HALF_EVEN)


def test_a_rerun_changes_nothing_and_a_touched_file_replaces_its_slices(registry, warehouse, changes):
    assert run_source(registry, warehouse, "gcp_hist", "gcp_price_history", {"path": str(changes)}).ok
    exclude = ("ingest_run_id",)
    before = [table_digest(warehouse, t, exclude) for t in ("price_history", "spot_prices")]
    assert run_source(registry, warehouse, "gcp_hist", "gcp_price_history", {"path": str(changes)}).status == "skipped"
    stat = changes.stat()
    os.utime(changes, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    again = run_source(registry, warehouse, "gcp_hist", "gcp_price_history", {"path": str(changes)})
    assert again.status == "succeeded"
    assert [table_digest(warehouse, t, exclude) for t in ("price_history", "spot_prices")] == before


def test_the_catalogue_re_adds_its_points_after_the_import_replaced_their_slices(registry, warehouse, changes):
    with catalog_server() as server:
        options = {"endpoint": server.url, "currency": "USD", "initial_backoff_s": 0.01}
        assert run_source(registry, warehouse, "cat", "gcp_catalog", options).ok
        catalog_points = query(warehouse, "SELECT count(*) FROM price_history WHERE source LIKE 'gcp:%'")[0][0]
        assert run_source(registry, warehouse, "gcp_hist", "gcp_price_history", {"path": str(changes)}).ok
        healed = run_source(registry, warehouse, "cat", "gcp_catalog", options)
    assert healed.status == "succeeded"
    assert query(warehouse, "SELECT count(*) FROM price_history WHERE source LIKE 'gcp:%'")[0][0] == catalog_points
    assert query(warehouse, "SELECT count(*) FROM price_history WHERE source LIKE 'cyclenerd:%'")[0][0] == sum(
        _csv_counts().values()
    )


def test_a_bad_file_names_the_line_and_writes_nothing(registry, warehouse, tmp_path):
    bad = tmp_path / "changes.csv"
    lines = PRICE_CHANGES.read_text().splitlines()
    fields = lines[3].split(",")
    fields[7] = "3x"
    bad.write_text("\n".join([lines[0], lines[1], lines[2], ",".join(fields)]) + "\n")
    result = run_source(registry, warehouse, "gcp_hist", "gcp_price_history", {"path": str(bad)})
    assert result.status == "failed" and "line 4" in result.error and "hour_ondemand_usd" in result.error
    assert query(warehouse, "SELECT count(*) FROM price_history")[0][0] == 0
