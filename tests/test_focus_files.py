"""focus_files loads the real FOCUS sample exactly, in CSV and Parquet, and replaces restated periods."""

from __future__ import annotations

import csv
import shutil
from collections import defaultdict
from datetime import UTC
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from gpufinops.ingest.core.runner import run_source
from tests.conftest import FOCUS_SAMPLE, query, table_digest


def file_sums(path: Path, by: str, column: str = "BilledCost") -> dict[str, Decimal]:
    """The file's own sums, computed with Decimal straight from the text."""
    sums: dict[str, Decimal] = defaultdict(Decimal)
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row[column] not in ("NULL", ""):
                sums[row[by]] += Decimal(row[column])
    return dict(sums)


def load(registry, warehouse, path, source="focus", **kwargs):
    return run_source(
        registry,
        warehouse,
        source,
        "focus_files",
        {"path": str(path)},
        team_tag_keys=("team", "business_unit"),
        **kwargs,
    )


def sample_as_parquet(tmp_path: Path) -> Path:
    """The sample converted to Parquet the way an export writes it: money as decimals, ids as text."""
    table = pacsv.read_csv(
        FOCUS_SAMPLE,
        convert_options=pacsv.ConvertOptions(
            null_values=["NULL", ""],
            strings_can_be_null=True,
            column_types={c: pa.string() for c in ("BillingAccountId", "SubAccountId", "ListUnitPrice", "Id")},
        ),
    )
    money_cols = [
        "BilledCost",
        "EffectiveCost",
        "ListCost",
        "ContractedCost",
        "ConsumedQuantity",
        "ContractedUnitPrice",
        "PricingQuantity",
    ]
    for name in money_cols:
        i = table.schema.get_field_index(name)
        text = pacsv.read_csv(
            FOCUS_SAMPLE,
            convert_options=pacsv.ConvertOptions(
                include_columns=[name], column_types={name: pa.string()}, null_values=["NULL"], strings_can_be_null=True
            ),
        ).column(0)
        table = table.set_column(i, name, text.cast(pa.decimal128(38, 15)))
    out = tmp_path / "sample.parquet"
    pq.write_table(table, out)
    return out


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_sample_totals_equal_the_files_own_sums_to_the_cent(focus_registry, warehouse, tmp_path, fmt):
    path = FOCUS_SAMPLE if fmt == "csv" else sample_as_parquet(tmp_path)
    result = load(focus_registry, warehouse, path)
    assert result.status == "succeeded" and result.rows == 1000
    for column in ("BilledCost", "EffectiveCost", "ListCost"):
        expected = file_sums(FOCUS_SAMPLE, "ProviderName", column)
        got = dict(query(warehouse, f'SELECT "ProviderName", sum("{column}") FROM cost_line_items GROUP BY 1'))
        assert set(got) == set(expected) == {"AWS", "Microsoft", "Oracle"}
        for provider, total in expected.items():
            assert got[provider] == total, (column, provider)  # exact, not just to the cent
    by_category = file_sums(FOCUS_SAMPLE, "ChargeCategory")
    got = dict(query(warehouse, 'SELECT "ChargeCategory", sum("BilledCost") FROM cost_line_items GROUP BY 1'))
    assert got == by_category


def test_ids_stay_text_and_tags_give_teams(focus_registry, warehouse):
    load(focus_registry, warehouse, FOCUS_SAMPLE)
    with open(FOCUS_SAMPLE, newline="") as f:
        rows = list(csv.DictReader(f))
    accounts = {r["SubAccountId"] for r in rows if r["SubAccountId"] != "NULL"}
    got = {
        r[0]
        for r in query(
            warehouse, 'SELECT DISTINCT "SubAccountId" FROM cost_line_items WHERE "SubAccountId" IS NOT NULL'
        )
    }
    assert got == accounts
    # business_unit is the team tag here; rows without tags have no team
    tagged = sum(1 for r in rows if r["Tags"] not in ("NULL", "") and '"business_unit"' in r["Tags"])
    assert query(warehouse, 'SELECT count(*) FROM cost_line_items WHERE "x_Team" IS NOT NULL')[0][0] == tagged
    # GPU instance hours: the instance type comes from the charge description
    g5 = sum(1 for r in rows if " g5.4xlarge " in r["ChargeDescription"])
    assert g5 > 0
    assert (
        query(warehouse, """SELECT count(*) FROM cost_line_items WHERE "x_InstanceType" = 'g5.4xlarge'""")[0][0] == g5
    )
    ts = query(warehouse, 'SELECT min("ChargePeriodStart") FROM cost_line_items')[0][0]
    assert ts.utcoffset().total_seconds() == 0


def test_second_run_changes_nothing_and_full_refresh_replaces(focus_registry, warehouse):
    first = load(focus_registry, warehouse, FOCUS_SAMPLE)
    before = table_digest(warehouse, "cost_line_items")
    second = load(focus_registry, warehouse, FOCUS_SAMPLE)
    assert second.status == "skipped"
    assert table_digest(warehouse, "cost_line_items") == before
    content = table_digest(warehouse, "cost_line_items", exclude=("x_IngestRunId",))
    third = load(focus_registry, warehouse, FOCUS_SAMPLE, full_refresh=True)
    assert third.status == "succeeded" and third.rows == first.rows
    assert table_digest(warehouse, "cost_line_items", exclude=("x_IngestRunId",)) == content
    assert query(warehouse, "SELECT count(*) FROM cost_line_items")[0][0] == 1000


def write_rows(path: Path, rows: list[dict], fieldnames: list[str]) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fieldnames, quoting=csv.QUOTE_ALL)
        writer.writeheader()
        writer.writerows(rows)


def split_sample(tmp_path: Path) -> tuple[list[dict], list[str]]:
    with open(FOCUS_SAMPLE, newline="") as f:
        reader = csv.DictReader(f)
        return list(reader), list(reader.fieldnames or ())


def test_restated_period_replaces_the_old_rows(focus_registry, warehouse, tmp_path):
    rows, fields = split_sample(tmp_path)
    september = [r for r in rows if r["BillingPeriodStart"].startswith("2024-09")]
    october = [r for r in rows if r["BillingPeriodStart"].startswith("2024-10")]
    export = tmp_path / "export"
    export.mkdir()
    write_rows(export / "2024-09.csv", september, fields)
    write_rows(export / "2024-10.csv", october, fields)
    assert load(focus_registry, warehouse, export / "*.csv").rows == 1000
    october_digest = query(
        warehouse,
        """SELECT count(*), sum("BilledCost") FROM cost_line_items
                                         WHERE "BillingPeriodStart" >= '2024-10-01'""",
    )
    # the provider restates September: fewer rows, each cost doubled
    restated = [dict(r, BilledCost=str(Decimal(r["BilledCost"]) * 2)) for r in september[:500]]
    write_rows(export / "2024-09.csv", restated, fields)
    result = load(focus_registry, warehouse, export / "*.csv")
    assert result.status == "succeeded" and result.rows == 500
    got = query(
        warehouse,
        """SELECT count(*), sum("BilledCost") FROM cost_line_items
                              WHERE "BillingPeriodStart" < '2024-10-01'""",
    )[0]
    assert got == (500, sum(Decimal(r["BilledCost"]) for r in restated))
    assert (
        query(
            warehouse,
            """SELECT count(*), sum("BilledCost") FROM cost_line_items
                               WHERE "BillingPeriodStart" >= '2024-10-01'""",
        )
        == october_digest
    )


def test_a_period_split_over_files_is_reloaded_whole(focus_registry, warehouse, tmp_path):
    rows, fields = split_sample(tmp_path)
    export = tmp_path / "export"
    export.mkdir()
    write_rows(export / "part-1.csv", rows[:600], fields)
    write_rows(export / "part-2.csv", rows[600:], fields)
    assert load(focus_registry, warehouse, export / "part-*.csv").rows == 1000
    write_rows(export / "part-2.csv", rows[600:900], fields)  # part 2 re-delivered, smaller
    result = load(focus_registry, warehouse, export / "part-*.csv")
    assert result.status == "succeeded"
    assert query(warehouse, "SELECT count(*) FROM cost_line_items")[0][0] == 900
    (export / "part-2.csv").unlink()  # and then withdrawn
    load(focus_registry, warehouse, export / "part-*.csv")
    assert query(warehouse, "SELECT count(*) FROM cost_line_items")[0][0] == 600


def test_sources_do_not_touch_each_others_slices(focus_registry, warehouse, tmp_path):
    copy = tmp_path / "copy.csv"
    shutil.copy(FOCUS_SAMPLE, copy)
    load(focus_registry, warehouse, FOCUS_SAMPLE, source="a")
    load(focus_registry, warehouse, copy, source="b")
    load(focus_registry, warehouse, FOCUS_SAMPLE, source="a", full_refresh=True)
    assert query(warehouse, 'SELECT "x_Source", count(*) FROM cost_line_items GROUP BY 1 ORDER BY 1') == [
        ("a", 1000),
        ("b", 1000),
    ]


def test_since_until_reloads_only_the_periods_in_range(focus_registry, warehouse, tmp_path):
    from datetime import datetime

    rows, fields = split_sample(tmp_path)
    export = tmp_path / "export"
    export.mkdir()
    write_rows(export / "all.csv", rows, fields)
    assert load(focus_registry, warehouse, export / "*.csv").rows == 1000
    state = query(warehouse, "SELECT state FROM ingest_state WHERE source = 'focus'")
    october = datetime(2024, 10, 1, tzinfo=UTC)
    result = load(focus_registry, warehouse, export / "*.csv", since=october)
    assert result.status == "succeeded" and result.rows == 1  # the one October line
    result = load(focus_registry, warehouse, export / "*.csv", until=october)
    assert result.status == "succeeded" and result.rows == 999
    assert query(warehouse, "SELECT count(*) FROM cost_line_items")[0][0] == 1000
    assert query(warehouse, "SELECT state FROM ingest_state WHERE source = 'focus'") == state
    result = load(focus_registry, warehouse, export / "*.csv", since=datetime(2025, 1, 1, tzinfo=UTC))
    assert result.status == "skipped"
