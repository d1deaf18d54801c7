"""gcp_billing_export against a real BigQuery API server on loopback (bqemulator) and on exported files.

The rows are koku's real standard/detailed export rows (tests/data/gcp/, Apache-2.0), flattened to
CSV by koku; the expected totals are computed here from the CSV text with Decimal, independently of
the ingestor's SQL.
"""

from __future__ import annotations

import ast
import csv
import json
import shutil
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from gpufinops.ingest.core.registry import Registry
from gpufinops.ingest.core.runner import run_source
from gpufinops.ingest.gcp.gcp_billing_export import GcpBillingExport
from gpufinops.ingest.gcp.gcp_export_files import read_flat_csv, to_jsonl
from tests.bq_emulator import DATASET, PROJECT, bq_row
from tests.conftest import query
from tests.gcp_loopback import GCP_DATA, KOKU, ends_before_it_starts, koku_flat_rows, koku_rows
from tests.relay_proxy import RelayProxy

TEAM_KEYS = ("team", "vm_key_proj2")


@pytest.fixture
def registry() -> Registry:
    r = Registry()
    r.register(GcpBillingExport)
    return r


def expected_totals() -> dict[tuple[str, str], tuple[Decimal, Decimal, int]]:
    """(project id, usage day) -> (Σ cost, Σ credits, rows), straight from the CSV text."""
    totals: dict = defaultdict(lambda: [Decimal(0), Decimal(0), 0])
    for name in KOKU:
        with open(GCP_DATA / name, newline="") as f:
            for row in csv.DictReader(f):
                if ends_before_it_starts(row):
                    continue
                key = (row["project.id"], row["usage_start_time"][:10])
                totals[key][0] += Decimal(row["cost"])
                totals[key][1] += sum(
                    (Decimal(repr(c["amount"])) for c in ast.literal_eval(row["credits"] or "[]")), Decimal(0)
                )
                totals[key][2] += 1
    return {k: tuple(v) for k, v in totals.items()}


def loaded_totals(warehouse: Path) -> dict[tuple[str, str], tuple[Decimal, Decimal, int]]:
    rows = query(
        warehouse,
        """SELECT "SubAccountId", strftime("ChargePeriodStart", '%Y-%m-%d'), sum("BilledCost"),
                                      sum("EffectiveCost" - "BilledCost"), count(*)
                               FROM cost_line_items GROUP BY ALL""",
    )
    return {(p, d): (Decimal(c).normalize(), Decimal(cr).normalize(), n) for p, d, c, cr, n in rows}


def _normal(totals: dict) -> dict:
    return {k: (v[0].normalize(), v[1].normalize(), v[2]) for k, v in totals.items()}


def bq_options(emulator, table: str, **extra) -> dict:
    return {"project": PROJECT, "dataset": DATASET, "table": table, "endpoint": emulator.endpoint, **extra}


def run_bq(registry: Registry, warehouse: Path, emulator, table: str):
    """One run of the source "gcp" over the emulator's export ``table``."""
    return run_source(registry, warehouse, "gcp", "gcp_billing_export", bq_options(emulator, table))


def example_table(emulator, table: str) -> tuple[str, list[dict]]:
    """A new export ``table`` holding koku's tmp_example.csv rows: (its name, the rows)."""
    emulator.create_export_table(table)
    rows = koku_flat_rows("tmp_example.csv")
    emulator.insert(table, rows)
    return table, rows


def test_bigquery_export_totals_equal_the_source_rows_per_project_and_day(bq_emulator, registry, warehouse):
    table = "gcp_billing_export_resource_v1_0000_TOTALS"
    bq_emulator.create_export_table(table)
    bq_emulator.insert(table, koku_rows())
    result = run_source(
        registry, warehouse, "gcp", "gcp_billing_export", bq_options(bq_emulator, table), team_tag_keys=TEAM_KEYS
    )
    assert result.status == "succeeded", result.error
    expected = _normal(expected_totals())
    assert loaded_totals(warehouse) == expected
    assert result.rows == sum(v[2] for v in expected.values())
    # detailed-export columns and labels came through BigQuery's nested records
    assert query(warehouse, """SELECT count(*) FROM cost_line_items WHERE "ResourceId" = 'instance-1'""")[0][0] > 0
    teams = query(warehouse, """SELECT DISTINCT "x_Team" FROM cost_line_items WHERE "x_Team" IS NOT NULL""")
    assert ("vm_label_proj2",) in teams
    again = run_bq(registry, warehouse, bq_emulator, table)
    assert again.status == "skipped"


def test_late_credits_restate_only_their_day(bq_emulator, registry, warehouse):
    table, rows = example_table(bq_emulator, "gcp_billing_export_v1_0000_LATE")
    first = run_bq(registry, warehouse, bq_emulator, table)
    assert first.status == "succeeded", first.error
    before = loaded_totals(warehouse)
    runs_before = dict(
        query(
            warehouse,
            """SELECT strftime("ChargePeriodStart", '%Y-%m-%d'), any_value("x_IngestRunId")
                                           FROM cost_line_items GROUP BY 1""",
        )
    )
    day_row = next(
        r for r in rows if r["project"]["id"] == "test-project-id" and r["usage_start_time"].startswith("2020-10-02")
    )
    late = json.loads(json.dumps(day_row))
    late.update(
        cost="0",
        cost_at_list="0",
        export_time="2020-11-03 06:00:00+00:00",
        credits=[
            {
                "name": "Sustained use discount",
                "amount": "-0.0123",
                "type": "SUSTAINED_USAGE_DISCOUNT",
                "id": "sud-1",
                "full_name": None,
            }
        ],
    )
    bq_emulator.insert(table, [late])
    second = run_bq(registry, warehouse, bq_emulator, table)
    assert second.status == "succeeded", second.error
    after = loaded_totals(warehouse)
    key = ("test-project-id", "2020-10-02")
    assert after[key] == (before[key][0], (before[key][1] + Decimal("-0.0123")).normalize(), before[key][2] + 1)
    assert {k: v for k, v in after.items() if k[1] != "2020-10-02"} == {
        k: v for k, v in before.items() if k[1] != "2020-10-02"
    }
    runs_after = dict(
        query(
            warehouse,
            """SELECT strftime("ChargePeriodStart", '%Y-%m-%d'), any_value("x_IngestRunId")
                                          FROM cost_line_items GROUP BY 1""",
        )
    )
    assert runs_after["2020-10-02"] == second.run_id  # the day was re-read whole
    assert {d: r for d, r in runs_after.items() if d != "2020-10-02"} == {
        d: r for d, r in runs_before.items() if d != "2020-10-02"
    }  # the other days were not
    assert second.watermark == "2020-11-03T06:00:00+00:00"


def test_a_row_exported_before_the_watermark_is_read_within_the_lookback(bq_emulator, registry, warehouse):
    table, rows = example_table(bq_emulator, "gcp_billing_export_v1_0000_LOOKBACK")
    assert run_bq(registry, warehouse, bq_emulator, table).ok
    straggler = json.loads(json.dumps(rows[0]))
    straggler.update(cost="1.5", export_time="2020-10-30 08:00:00+00:00")  # older than the newest export_time
    bq_emulator.insert(table, [straggler])
    result = run_bq(registry, warehouse, bq_emulator, table)
    assert result.status == "succeeded" and result.rows > 0
    expected = _normal(expected_totals_for([*rows, straggler]))
    assert loaded_totals(warehouse) == expected


def expected_totals_for(rows: list[dict]) -> dict:
    totals: dict = defaultdict(lambda: [Decimal(0), Decimal(0), 0])
    for r in rows:
        key = (r["project"]["id"], r["usage_start_time"][:10])
        totals[key][0] += Decimal(r["cost"])
        totals[key][1] += sum((Decimal(c["amount"]) for c in r["credits"] or []), Decimal(0))
        totals[key][2] += 1
    return totals


class _Throttle(RelayProxy):
    """A loopback proxy in front of the emulator answering the first requests with 429 / 503."""

    def __init__(self, target: str, failures: list[int]):
        super().__init__(target, timeout=60)
        self.failures = list(failures)
        self.seen: list[str] = []

    def intercept(self, handler, data):
        self.seen.append(handler.command)
        if self.failures:
            status = self.failures.pop(0)
            return status, {
                "error": {"code": status, "message": "slow down", "errors": [{"reason": "rateLimitExceeded"}]}
            }
        return None


def test_bigquery_429_and_503_are_retried(bq_emulator, registry, warehouse):
    table = "gcp_billing_export_v1_0000_RETRY"
    bq_emulator.create_export_table(table)
    rows = read_flat_csv("test", str(GCP_DATA / "2022-08-01_5.csv")).to_pylist()
    bq_emulator.insert(table, rows)
    with _Throttle(bq_emulator.endpoint, [429, 503, 429]) as proxy:
        options = {**bq_options(bq_emulator, table), "endpoint": proxy.url, "initial_backoff_s": 0.01}
        result = run_source(registry, warehouse, "gcp", "gcp_billing_export", options)
        assert result.status == "succeeded", result.error
        assert len(proxy.seen) > 3 and not proxy.failures
    assert result.rows == len(rows)


def test_exported_jsonl_and_parquet_read_like_the_table(tmp_path, registry):
    rows = koku_rows()
    nested = [bq_row(r) for r in rows]
    (tmp_path / "jsonl").mkdir()
    (tmp_path / "jsonl" / "export-000000000000.json").write_bytes(to_jsonl(nested))
    (tmp_path / "parquet").mkdir()
    import pyarrow as pa

    pq.write_table(pa.Table.from_pylist(nested), tmp_path / "parquet" / "export-000000000000.parquet")
    expected = _normal(expected_totals())
    for kind in ("jsonl", "parquet"):
        warehouse = tmp_path / f"{kind}.duckdb"
        result = run_source(registry, warehouse, "gcp", "gcp_billing_export", {"path": str(tmp_path / kind / "*")})
        assert result.status == "succeeded", (kind, result.error)
        assert loaded_totals(warehouse) == expected, kind


def test_the_deprecated_file_export_is_refused_and_nothing_is_written(tmp_path, registry, warehouse):
    shutil.copy(GCP_DATA / "evidence-2019-06-03_legacy_file_export.csv", tmp_path / "legacy.csv")
    result = run_source(registry, warehouse, "gcp", "gcp_billing_export", {"path": str(tmp_path / "*.csv")})
    assert result.status == "failed"
    assert "legacy.csv" in result.error and "file export" in result.error and "deprecated" in result.error
    assert query(warehouse, "SELECT count(*) FROM cost_line_items")[0][0] == 0


def test_source_needs_either_bigquery_or_path(registry, warehouse):
    result = run_source(registry, warehouse, "gcp", "gcp_billing_export", {})
    assert result.status == "failed" and "project, dataset and table" in result.error


def test_a_missing_table_fails_the_run_naming_it(bq_emulator, registry, warehouse):
    options = bq_options(bq_emulator, "gcp_billing_export_v1_0000_MISSING", max_attempts=2, initial_backoff_s=0.01)
    result = run_source(registry, warehouse, "gcp", "gcp_billing_export", options)
    assert result.status == "failed"
    assert result.error.startswith("gcp: BigQuery") and "gcp_billing_export_v1_0000_MISSING" in result.error
    assert query(warehouse, "SELECT count(*) FROM cost_line_items")[0][0] == 0


def _rows_job(emulator, table: str):
    """A real query job on the emulator, through a client without the transport's per-request bounds: what
    remains to bound is the read as a whole (every page small, their sum too large or too slow)."""
    example_table(emulator, table)
    return emulator.client().query(f"SELECT * FROM `{PROJECT}.{DATASET}.{table}`")


def test_a_bigquery_result_over_max_body_mb_stops_naming_the_source_call_and_bound(bq_emulator):
    from gpufinops.ingest.core.transport import Bounds, BoundTripped
    from gpufinops.ingest.gcp.gcp_common import bounded_arrow

    job = _rows_job(bq_emulator, "gcp_billing_export_v1_0000_BIG")
    whole = bounded_arrow("gcp", "BigQuery rows on `t`", job, Bounds())
    assert whole.num_rows == len(koku_flat_rows("tmp_example.csv"))
    limit = whole.nbytes / 2 / 2**20  # half of what the rows take in memory
    with pytest.raises(BoundTripped) as tripped:
        bounded_arrow("gcp", "BigQuery rows on `t`", job, Bounds(max_body_mb=limit))
    assert str(tripped.value) == f"gcp: BigQuery rows on `t` read over {limit:g} MiB of rows (max_body_mb); stopped"


def test_a_bigquery_result_past_its_deadline_stops_naming_the_source_call_and_bound(bq_emulator):
    """The clock is the one thing replaced (a read that takes 121 s would make the test take as long)."""
    from gpufinops.ingest.core.transport import Bounds, BoundTripped
    from gpufinops.ingest.gcp.gcp_common import bounded_arrow

    job = _rows_job(bq_emulator, "gcp_billing_export_v1_0000_SLOW")
    ticks = iter([0.0, 121.0, 242.0, 363.0])
    with pytest.raises(BoundTripped) as tripped:
        bounded_arrow("gcp", "BigQuery rows on `t`", job, Bounds(timeout_s=120), clock=lambda: next(ticks))
    assert "gcp: BigQuery rows on `t` did not finish within its 120 s deadline (timeout_s)" in str(tripped.value)


@pytest.mark.parametrize(
    "garbage", ("garbage,line", "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q,r,s,t,u,v,w,x,y,z,1,2,3,4,5,6,7,8")
)
def test_a_flat_csv_line_with_fewer_or_more_fields_than_the_header_is_refused_naming_it(
    tmp_path, registry, warehouse, garbage
):
    """A garbage line (a truncated write, a stray comma) mid-file would load its values under the wrong columns
    or as empty ones: the run fails naming the file and the line, and nothing is written."""
    lines = (GCP_DATA / "2022-08-01_5.csv").read_text().splitlines(keepends=True)
    width = len(next(csv.reader([lines[0]])))
    if garbage.count(",") + 1 > width:
        garbage += ",x" * width  # more fields than the header, whatever its width
    (tmp_path / "export.csv").write_text("".join(lines[:4]) + garbage + "\n" + "".join(lines[4:]))
    result = run_source(registry, warehouse, "gcp", "gcp_billing_export", {"path": str(tmp_path / "*.csv")})
    assert result.status == "failed"
    assert "export.csv" in result.error and "line 5" in result.error and f"header has {width}" in result.error, (
        result.error
    )
    assert query(warehouse, "SELECT count(*) FROM cost_line_items")[0][0] == 0
