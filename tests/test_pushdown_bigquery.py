"""``gcp_billing_export`` with ``push_down = true``: the FOCUS mapping + rollup as one BigQuery job.

1. The BigQuery text (``gcp_pushdown.rollup_query``: ``conform_select`` + ``focus_select`` + the rollup,
   transpiled by ``pushdown.to_dialect``), read back into DuckDB by sqlglot and run over the same
   export rows, equals the local path's line items summed by the rollup keys — exactly.
2. The ingestor with ``push_down = true`` against bqemulator (a BigQuery API server on loopback):
   per project and day the warehouse equals the row path's, the whole rollup equals the row path's
   lines summed by the rollup keys, the bytes BigQuery billed are in the ledger, and a late credit
   re-runs (and replaces) only its usage day.

The rows are koku's real export rows (tests/data/gcp, Apache-2.0) and GPU rows of the demo fleet
(labels, system labels with the machine type, GPU and Spot SKUs).

bqemulator's limits, worked around here and nowhere in the product:
- it runs a bare ``BIGNUMERIC`` as DECIMAL(38,5) (money becomes 0), so the emulator gets the
  ``pinned_decimals`` text, ``BIGNUMERIC(p, s)``, which BigQuery itself accepts only in declarations;
  test 1 checks that the two texts differ in those type parameters only;
- it reports 0 bytes processed and no bytes billed: a loopback proxy in front of it sets both in
  every job's statistics, so the ledger's accounting is checked with known figures;
- (worked around in the product's text, valid BigQuery either way) it drops RECORD columns from a
  ``SELECT *`` and re-prints a query that refers to a ``WITH OFFSET`` column without its types.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from functools import partial
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlglot

from gpufinops.ingest.core import pushdown
from gpufinops.ingest.core.registry import Registry
from gpufinops.ingest.core.runner import run_source
from gpufinops.ingest.gcp import gcp_pushdown
from gpufinops.ingest.gcp.gcp_billing_export import GcpBillingExport
from gpufinops.ingest.gcp.gcp_export_mapping import CANONICAL
from tests.bq_emulator import DATASET, PROJECT, bq_field, bq_record, bq_time
from tests.conftest import query
from tests.gcp_loopback import koku_rows
from tests.relay_proxy import RelayProxy

TEAM_KEYS = ("team", "vm_key_proj2")
KEYS = ", ".join(f'"{k}"' for k in pushdown.ROLLUP_KEYS)
SUMS = ", ".join(f'sum("{c}")' for c in pushdown.ROLLUP_SUMS)


@pytest.fixture
def registry() -> Registry:
    r = Registry()
    r.register(GcpBillingExport)
    return r


@pytest.fixture(scope="module")
def demo_rows(tmp_path_factory) -> list[dict]:
    """The demo fleet's GCP export rows (a week: GPU VMs with labels, machine types, Spot and on-demand SKUs)."""
    from gpufinops.simulator import demo_fleet

    home = tmp_path_factory.mktemp("demo")
    demo_fleet.generate(home, days=7, seed=7)
    rows = []
    for path in sorted((home / "exports" / "gcp" / "billing").glob("*.json")):
        rows += [json.loads(line) for line in path.read_text().splitlines()]
    return rows


def export_fields() -> list:
    return [bq_field(name, kind) for name, kind in CANONICAL.items()]


def usage_day(row: dict) -> str:
    return bq_time(row["usage_start_time"]).strftime("%Y-%m-%d")


def warehouse_rollup(warehouse: Path, source: str | None = None) -> list[tuple]:
    """The warehouse's lines of ``source`` summed by the rollup keys: what the rollup must equal."""
    where = f"WHERE x_Source = '{source}'" if source else ""
    return query(warehouse, f"SELECT {KEYS}, {SUMS} FROM cost_line_items {where} GROUP BY ALL ORDER BY ALL")


def export_table(rows: list[dict]) -> pa.Table:
    """The rows as the export table holds them (and as the row path fetches them): FLOAT64 money."""
    return pa.Table.from_pylist(
        [bq_record(r, arrow=True) for r in rows], schema=gcp_pushdown.arrow_schema(export_fields())
    )


def load_local(tmp_path: Path, registry: Registry, table: pa.Table, warehouse: Path) -> None:
    """The local path over the rows, extracted as Parquet: doubles, as BigQuery holds them (a JSONL
    extract prints them as text with up to 17 digits, which the file path reads exactly)."""
    folder = tmp_path / "parquet"
    folder.mkdir(exist_ok=True)
    pq.write_table(table, folder / "export-000000000000.parquet")
    result = run_source(
        registry, warehouse, "gcp", "gcp_billing_export", {"path": str(folder / "*.parquet")}, team_tag_keys=TEAM_KEYS
    )
    assert result.status == "succeeded", result.error


def test_the_bigquery_text_read_back_equals_the_local_path(tmp_path, registry, warehouse, demo_rows):
    rows = koku_rows() + demo_rows
    table = export_table(rows)
    load_local(tmp_path, registry, table, warehouse)
    expected = warehouse_rollup(warehouse)

    schema = table.schema
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"ATTACH ':memory:' AS \"{PROJECT}\"")
    con.execute(f'CREATE SCHEMA "{PROJECT}"."{DATASET}"')
    con.register("export_rows", table)
    con.execute(f'CREATE TABLE "{PROJECT}"."{DATASET}".export AS SELECT * FROM export_rows')
    days = sorted({usage_day(r) for r in rows})
    text = gcp_pushdown.rollup_query(PROJECT, DATASET, "export", schema, days, TEAM_KEYS)
    pinned = gcp_pushdown.rollup_query(PROJECT, DATASET, "export", schema, days, TEAM_KEYS, pinned_decimals=True)

    # what BigQuery gets: BigQuery SQL, no DuckDB construct left, and the pinned text differs in type parameters only
    assert re.sub(r"BIGNUMERIC\(\d+, \d+\)", "BIGNUMERIC", pinned) == text != pinned
    sqlglot.parse_one(text, read="bigquery")
    for duckdb_only in (
        "MAP_FROM_ENTRIES",
        "MAP_EXTRACT",
        "LIST_",
        "TRANSFORM(",
        "->",
        "DECIMAL",
        "HUGEINT",
        "TIMEZONE(",
        "STRPTIME",
        "CARDINALITY",
        "REGEXP_MATCHES",
        "WITH OFFSET",
        "SELECT * FROM `",
    ):
        assert duckdb_only not in text.upper(), duckdb_only
    assert f"`{PROJECT}`.`{DATASET}`.`export`" in text and "BIGNUMERIC" in text and "UNNEST(" in text

    back = pushdown.back_to_duckdb(pinned, "bigquery")
    con.register("bigquery_result", con.sql(back).to_arrow_table())
    got = con.sql(
        f"SELECT * FROM ({pushdown.typed_rollup_select('bigquery_result', empty_is_null=False)}) ORDER BY ALL"
    ).fetchall()
    assert got == expected  # every key, every DECIMAL sum, to the last digit
    assert len(got) < len(rows)  # it does roll up
    gpu = [r for r in got if r[pushdown.ROLLUP_COLUMNS.index("x_GpuModel")]]
    assert gpu and all(r[pushdown.ROLLUP_COLUMNS.index("x_InstanceType")] for r in gpu)  # machine type looked up
    assert {r[pushdown.ROLLUP_COLUMNS.index("x_Team")] for r in got} >= {"vm_label_proj2"}
    assert {r[pushdown.ROLLUP_COLUMNS.index("PricingCategory")] for r in gpu} >= {"Standard", "Dynamic"}
    con.close()


def test_bigquery_rewrites_keep_the_semantics_of_duckdb():
    """Each rewrite, read back, gives what DuckDB gives for the original (NULLs and empty lists included)."""
    rows = (
        "SELECT * FROM (VALUES (1, [{'key': 'a', 'value': 'x'}, {'key': 'b', 'value': ''}], [{'amount': 1.5}, "
        "{'amount': NULL}], '202602'), (2, [], [], '202612'), (3, NULL, NULL, NULL)) t(id, kv, credits, month)"
    )
    duck = (
        "SELECT id, map_extract_value(map_from_entries(kv), 'b') AS b, map_extract_value(map_from_entries(kv), 'z') "
        "AS z, cardinality(map_from_entries(kv)) AS n, COALESCE(list_sum(list_transform(credits, lambda c: "
        "COALESCE(c.amount, 0))), 0) AS credit, timezone('UTC', strptime(month || '01', '%Y%m%d') + INTERVAL 1 "
        "MONTH) AS period_end, CAST(1000.0000000000001 AS DECIMAL(38,15)) AS exact, floor(log10(1000)) AS digits "
        f"FROM ({rows}) ORDER BY id"
    )
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    text = pushdown.to_dialect(duck, "bigquery", pinned_decimals=True)
    assert "UNNEST" in text and "LOG10(" in text and "DATETIME_ADD(" in text and "CAST('1000.0000000000001' AS" in text
    assert con.sql(pushdown.back_to_duckdb(text, "bigquery")).fetchall() == con.sql(duck).fetchall()
    with pytest.raises(ValueError, match="not translated to BigQuery"):
        pushdown.to_dialect("SELECT list_transform(l, lambda x: x + 1)[1]", "bigquery")


# --- against bqemulator ------------------------------------------------------------------------------

BYTES_PROCESSED = 52_428_800  # what the proxy says each job processed (the emulator says 0)
BYTES_BILLED = 62_914_560  # … and billed (BigQuery bills at least 10 MB per table read)


class _BilledProxy(RelayProxy):
    """Loopback proxy in front of bqemulator: records each query sent and sets every job's byte statistics."""

    def __init__(self, target: str):
        super().__init__(target)
        self.queries: list[str] = []
        self.fail_rollup = False  # answer the rollup job with BigQuery's 400 for a query it can not run

    def intercept(self, handler, data):
        if data and handler.command == "POST" and handler.path.split("?")[0].endswith("/jobs"):
            sent = json.loads(data).get("configuration", {}).get("query", {}).get("query")
            if sent:
                self.queries.append(sent)
            if sent and self.fail_rollup and "`EffectiveCost`" in sent:  # not the fingerprints
                return 400, {
                    "error": {
                        "code": 400,
                        "message": "Resources exceeded during query execution",
                        "errors": [{"reason": "resourcesExceeded"}],
                    }
                }
        return None

    def rewrite(self, body: bytes, ctype: str) -> bytes:
        return self.with_statistics(body) if "json" in (ctype or "") else body

    @staticmethod
    def with_statistics(body: bytes) -> bytes:
        try:
            resource = json.loads(body)
        except ValueError:
            return body
        statistics = resource.get("statistics") if isinstance(resource, dict) else None
        if not isinstance(statistics, dict) or "query" not in statistics:
            return body
        statistics["totalBytesProcessed"] = str(BYTES_PROCESSED)
        statistics["query"].update(totalBytesProcessed=str(BYTES_PROCESSED), totalBytesBilled=str(BYTES_BILLED))
        return json.dumps(resource).encode()


@pytest.fixture
def pinned(monkeypatch):
    monkeypatch.setattr(gcp_pushdown, "PINNED_DECIMALS", True)  # bqemulator's BIGNUMERIC is DECIMAL(38,5)


def per_project_day(warehouse: Path, source: str) -> dict:
    rows = query(
        warehouse,
        f"""SELECT "SubAccountId", strftime("ChargePeriodStart", '%Y-%m-%d'), sum("BilledCost"),
                                       sum("EffectiveCost"), sum("ListCost"), sum("PricingQuantity")
                                FROM cost_line_items WHERE x_Source = '{source}' GROUP BY ALL""",
    )
    return {(p, d): tuple(values) for p, d, *values in rows}


def day_runs(warehouse: Path, source: str) -> dict[str, str]:
    return dict(
        query(
            warehouse,
            f"""SELECT strftime("ChargePeriodStart", '%Y-%m-%d'), any_value("x_IngestRunId")
                                     FROM cost_line_items WHERE x_Source = '{source}' GROUP BY 1""",
        )
    )


def test_push_down_against_the_emulator_equals_the_row_path_and_restates_changed_days(
    bq_emulator, registry, warehouse, demo_rows, pinned
):
    table = "gcp_billing_export_resource_v1_0000_PUSHDOWN"
    bq_emulator.create_export_table(table)
    gpu_days = sorted({usage_day(r) for r in demo_rows})[:2]
    rows = koku_rows() + [r for r in demo_rows if usage_day(r) in gpu_days]
    bq_emulator.client().insert_rows_json(f"{PROJECT}.{DATASET}.{table}", [bq_record(r) for r in rows])
    with _BilledProxy(bq_emulator.endpoint) as proxy:
        options = {"project": PROJECT, "dataset": DATASET, "table": table, "endpoint": proxy.url}
        # the same export read twice: row by row (gcp_rows), and rolled up in BigQuery (gcp_push)
        run_row_path = partial(
            run_source, registry, warehouse, "gcp_rows", "gcp_billing_export", options, team_tag_keys=TEAM_KEYS
        )
        push_options = {**options, "push_down": True}
        run_push_down = partial(
            run_source, registry, warehouse, "gcp_push", "gcp_billing_export", push_options, team_tag_keys=TEAM_KEYS
        )
        rows_run = run_row_path()
        assert rows_run.status == "succeeded", rows_run.error
        proxy.queries.clear()
        push = run_push_down()
        assert push.status == "succeeded", push.error

        # the same money per project and day — and the same rollup, key by key — as the row path
        assert per_project_day(warehouse, "gcp_push") == per_project_day(warehouse, "gcp_rows")
        assert warehouse_rollup(warehouse, "gcp_push") == warehouse_rollup(warehouse, "gcp_rows")
        assert 0 < push.rows < rows_run.rows == len(rows)  # only the rollup came home
        assert (
            query(
                warehouse,
                """SELECT count(*) FROM cost_line_items WHERE x_Source = 'gcp_push'
                                   AND "x_GpuModel" IS NOT NULL AND "x_InstanceType" IS NOT NULL""",
            )[0][0]
            > 0
        )
        # the rollup ran in BigQuery, as the pushed-down text; the ledger says what it cost
        assert len(proxy.queries) == 2 and "GROUP BY" in proxy.queries[1] and "UNNEST(" in proxy.queries[1]
        ledger = query(warehouse, "SELECT watermark FROM ingest_runs WHERE run_id = ?", [push.run_id])[0][0]
        assert (
            f"2 jobs, {2 * BYTES_BILLED:,} bytes billed, {2 * BYTES_PROCESSED:,} bytes processed, "
            f"{push.rows:,} rollup rows" in ledger
        )
        assert ledger.startswith(max(bq_time(r["export_time"]) for r in rows).isoformat() + " (bigquery: ")

        # a late credit for one usage day: the next run re-rolls that day only and replaces its slice
        before_runs = day_runs(warehouse, "gcp_push")
        day_row = next(
            r
            for r in rows
            if r["project"]["id"] == "test-project-id" and str(r["usage_start_time"]).startswith("2020-10-02")
        )
        exported = (max(bq_time(r["export_time"]) for r in rows) + timedelta(hours=1)).isoformat()  # it came late
        late = {
            **bq_record(day_row),
            "cost": 0.0,
            "cost_at_list": 0.0,
            "export_time": exported,
            "credits": [
                {
                    "name": "Sustained use discount",
                    "amount": -0.0123,
                    "type": "SUSTAINED_USAGE_DISCOUNT",
                    "id": "sud-1",
                    "full_name": None,
                }
            ],
        }
        bq_emulator.client().insert_rows_json(f"{PROJECT}.{DATASET}.{table}", [late])
        proxy.queries.clear()
        again = run_push_down()
        assert again.status == "succeeded", again.error
        assert re.findall(r"'(\d{4}-\d{2}-\d{2})' AS DATE", proxy.queries[-1]) == ["2020-10-02"]
        after_runs = day_runs(warehouse, "gcp_push")
        assert after_runs["2020-10-02"] == again.run_id
        assert {d: r for d, r in after_runs.items() if d != "2020-10-02"} == {
            d: r for d, r in before_runs.items() if d != "2020-10-02"
        }
        assert run_row_path().status == "succeeded"
        assert per_project_day(warehouse, "gcp_push") == per_project_day(warehouse, "gcp_rows")
        key = ("test-project-id", "2020-10-02")
        effective = per_project_day(warehouse, "gcp_push")[key][1]
        assert effective == per_project_day(warehouse, "gcp_rows")[key][1] and effective != 0

        # nothing new: skipped, and the ledger still says what the fingerprint query cost
        idle = run_push_down()
        assert idle.status == "skipped" and f"1 jobs, {BYTES_BILLED:,} bytes billed" in idle.watermark

        # a rollup job BigQuery refuses fails the run, names the job, and leaves the warehouse as it was
        before = query(warehouse, 'SELECT count(*), sum("BilledCost") FROM cost_line_items')
        bq_emulator.client().insert_rows_json(
            f"{PROJECT}.{DATASET}.{table}",
            [{**late, "export_time": (bq_time(exported) + timedelta(hours=1)).isoformat()}],
        )
        proxy.fail_rollup = True
        failed = run_push_down()
        assert failed.status == "failed" and "BigQuery rollup" in failed.error and "Resources exceeded" in failed.error
        assert query(warehouse, 'SELECT count(*), sum("BilledCost") FROM cost_line_items') == before


def test_push_down_needs_the_bigquery_table_and_a_boolean(tmp_path, registry, warehouse):
    result = run_source(
        registry, warehouse, "gcp", "gcp_billing_export", {"path": str(tmp_path / "*.json"), "push_down": True}
    )
    assert result.status == "failed" and "push_down = true needs the BigQuery table" in result.error
    result = run_source(
        registry,
        warehouse,
        "gcp",
        "gcp_billing_export",
        {"project": PROJECT, "dataset": DATASET, "table": "t", "push_down": "yes"},
    )
    assert result.status == "failed" and "sources.gcp.push_down: must be true or false" in result.error
