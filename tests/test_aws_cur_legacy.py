"""aws_cur reads the real legacy CUR files (both header dialects, csv.gz, koku's real bucket layout and
manifest) and AWS FOCUS exports, from moto's S3 on loopback and from a local copy of the bucket."""

from __future__ import annotations

import csv
import gzip
import shutil
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpufinops.ingest.aws.aws_cur2_format import write_delivery
from gpufinops.ingest.core.registry import default_registry
from gpufinops.ingest.core.runner import run_source
from tests import aws_cur_data as data
from tests.aws_loopback import moto_s3, upload_tree, use_dummy_credentials
from tests.conftest import FOCUS_SAMPLE, query

REGISTRY = default_registry()
TAGS = ("team", "user:team", "user_team", "business_unit")
CENT = Decimal("0.01")


def csv_sums(rows: list[dict], by: list[str], cost: str) -> dict[tuple, Decimal]:
    sums: dict[tuple, Decimal] = defaultdict(Decimal)
    for row in rows:
        sums[tuple(row[b] for b in by)] += Decimal(row[cost] or "0")
    return dict(sums)


def read_csv(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", newline="") as f:
        return list(csv.DictReader(f))


def test_koku_bucket_layout_loads_from_s3_through_its_real_manifest(tmp_path, warehouse, monkeypatch):
    use_dummy_credentials(monkeypatch)
    rows = read_csv(next(data.KOKU_LAYOUT.rglob("*.csv.gz")))
    with moto_s3() as endpoint:
        upload_tree(endpoint, "koku-bucket", "", data.KOKU_LAYOUT)  # the manifest's reportKeys start with '/'
        options = {"bucket": "koku-bucket", "region": "us-east-1", "endpoint_url": endpoint, "format": "legacy"}
        result = run_source(REGISTRY, warehouse, "koku", "aws_cur", options, team_tag_keys=TAGS)
        assert result.status == "succeeded", result.error
        assert result.rows == len(rows) == 13380
        got = query(
            warehouse,
            """SELECT "BillingAccountId", strftime("BillingPeriodStart", '%Y-%m-%dT%H:%M:%SZ'),
                                         sum("BilledCost") FROM cost_line_items GROUP BY ALL""",
        )
        expected = csv_sums(rows, ["bill/PayerAccountId", "bill/BillingPeriodStartDate"], "lineItem/UnblendedCost")
        # koku's generated costs carry up to 17 decimals; the warehouse keeps 15: equal to the cent, and closer
        assert {(a, p): v.quantize(CENT) for a, p, v in got} == {k: v.quantize(CENT) for k, v in expected.items()}
        assert all(abs(v - expected[(a, p)]) < Decimal("1E-9") for a, p, v in got)
        assert run_source(REGISTRY, warehouse, "koku", "aws_cur", options).status == "skipped"
    ids = query(warehouse, 'SELECT DISTINCT "BillingAccountId", "SubAccountId" FROM cost_line_items')
    assert set(ids) == {(r["bill/PayerAccountId"], r["lineItem/UsageAccountId"]) for r in rows}
    assert query(warehouse, """SELECT count(*) FROM cost_line_items WHERE x_InstanceType IS NOT NULL""")[0][0] == sum(
        1 for r in rows if r["product/instanceType"]
    )


def test_focus_converters_legacy_cur_with_tax_loads_to_the_cent(tmp_path, warehouse):
    rows = read_csv(data.LEGACY_CSV)
    data.legacy_layout(tmp_path / "sync", data.LEGACY_CSV, report="anon", prefix="cur")
    result = run_source(REGISTRY, warehouse, "legacy", "aws_cur", {"path": str(tmp_path / "sync")}, team_tag_keys=TAGS)
    assert result.status == "succeeded", result.error
    assert result.rows == len(rows) == 1281
    by_type = csv_sums(rows, ["lineItem/LineItemType"], "lineItem/UnblendedCost")
    got = dict(query(warehouse, """SELECT "ChargeCategory", sum("BilledCost") FROM cost_line_items GROUP BY 1"""))
    assert got == {"Usage": by_type[("Usage",)], "Tax": by_type[("Tax",)]}
    services = csv_sums(rows, ["lineItem/ProductCode"], "lineItem/UnblendedCost")
    assert sum(services.values()) == sum(got.values())
    regions = {
        r[0] for r in query(warehouse, 'SELECT DISTINCT "RegionId" FROM cost_line_items WHERE "RegionId" IS NOT NULL')
    }
    assert regions == {
        r["product/regionCode"] or r["product/region"] for r in rows if r["product/regionCode"] or r["product/region"]
    }


@pytest.mark.parametrize(
    "name, cost_column, type_column",
    [
        ("2022-07-01-alt-columns.csv", "line_item_unblended_cost", "line_item_line_item_type"),  # Athena snake_case
        ("2023-06-01.csv", "lineItem/UnblendedCost", "lineItem/LineItemType"),  # slash, Savings Plans
    ],
)
def test_both_legacy_header_dialects(tmp_path, warehouse, name, cost_column, type_column):
    source = data.AWS_DATA / "koku" / name
    rows = read_csv(source)
    gz = tmp_path / f"{Path(name).stem}.csv.gz"
    with open(source, "rb") as f, gzip.open(gz, "wb") as out:
        shutil.copyfileobj(f, out)
    data.legacy_layout(tmp_path / "sync", gz, report="dialect", period="20230601-20230701")
    result = run_source(
        REGISTRY,
        warehouse,
        "legacy",
        "aws_cur",
        {"path": str(tmp_path / "sync"), "format": "legacy"},
        team_tag_keys=TAGS,
    )
    assert result.status == "succeeded", result.error
    assert result.rows == len(rows)
    billed = query(warehouse, 'SELECT sum("BilledCost") FROM cost_line_items')[0][0]
    assert billed == sum(Decimal(r[cost_column]) for r in rows)
    if rows[0][type_column] == "SavingsPlanCoveredUsage":
        effective = query(warehouse, 'SELECT sum("EffectiveCost") FROM cost_line_items')[0][0]
        assert effective == sum(Decimal(r["savingsPlan/SavingsPlanEffectiveCost"]) for r in rows)
        assert {r[0] for r in query(warehouse, 'SELECT DISTINCT "PricingCategory" FROM cost_line_items')} == {
            "Committed"
        }


def test_aws_focus_export_goes_through_the_focus_mapping(tmp_path, warehouse):
    import pyarrow.csv as pacsv

    sample = pacsv.read_csv(
        FOCUS_SAMPLE,
        convert_options=pacsv.ConvertOptions(
            null_values=["NULL", ""],
            strings_can_be_null=True,
            column_types={
                c: pa.string()
                for c in (
                    "BillingAccountId",
                    "SubAccountId",
                    "ListUnitPrice",
                    "BilledCost",
                    "EffectiveCost",
                    "ListCost",
                    "ContractedCost",
                    "ContractedUnitPrice",
                    "PricingQuantity",
                    "ConsumedQuantity",
                )
            },
        ),
    )
    aws = sample.filter(pa.compute.equal(sample.column("ProviderName"), "AWS"))
    root = tmp_path / "sync"
    manifest = write_delivery(root, "focus", "2024-09", [])
    pq.write_table(aws, root / "focus" / "data" / "BILLING_PERIOD=2024-09" / "focus-00001.snappy.parquet")
    manifest.write_text(
        manifest.read_text().replace(
            '"dataFiles": []',
            '"dataFiles": ["s3://billing/focus/data/BILLING_PERIOD=2024-09/focus-00001.snappy.parquet"]',
        )
    )
    result = run_source(
        REGISTRY, warehouse, "focus", "aws_cur", {"path": str(root), "format": "focus"}, team_tag_keys=TAGS
    )
    assert result.status == "succeeded", result.error
    assert result.rows == aws.num_rows == 942
    expected = sum(Decimal(v) for v in aws.column("BilledCost").to_pylist() if v)
    assert query(warehouse, 'SELECT sum("BilledCost") FROM cost_line_items')[0][0] == expected
    g5 = query(
        warehouse, "SELECT count(*) FROM cost_line_items WHERE x_InstanceType = 'g5.4xlarge' AND x_GpuModel = 'A10G'"
    )
    assert g5[0][0] > 0
