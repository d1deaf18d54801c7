"""Benchmark: one month of CUR 2.0 line items, loaded locally vs rolled up where the data lives.

Generates (or reuses from ``bench/.cache/``) one billing period of N CUR 2.0 line items shaped like a
real GPU fleet's CUR: each instance keeps its type, team and pricing for the month, and every
instance-hour has one compute line and five data-transfer lines (usage types ``DataTransfer-Out``,
``-Regional``, inter-region …), as AWS writes them. Then, each step in a fresh process:

1. **local path**: ``aws_cur`` loads every line item into DuckDB — seconds, rows/s, peak RSS and the
   warehouse file's size;
2. **push-down path**: the rollup query Athena would run (``ingest/aws_athena.rollup_query``, the
   Trino text read back into DuckDB by sqlglot — Athena itself cannot run here), executed over the
   same Parquet files — seconds and the rows and bytes it would transfer — then loading those
   rollup rows as text, as they come back from ``GetQueryResults``, into a warehouse.

    python -m bench.bench_pushdown              # 50M line items (the size where push-down pays)
    python -m bench.bench_pushdown --quick      # 600k
"""

from __future__ import annotations

import shutil
import sys
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench import bench_aws_cur
from bench.harness import format_line, measure_in_subprocess, report, rows_main

CACHE_DIR = Path(__file__).resolve().parent / ".cache"
RESULTS_FILE = CACHE_DIR / "results.jsonl"
DEFAULT_ROWS, QUICK_ROWS = 50_000_000, 600_000
PERIOD, EXPORT, SOURCE = "2026-10", "cur2", "bench_pushdown"
HOURS = 744
LINES_PER_HOUR = 6  # one compute line + five data-transfer lines per instance-hour
TRANSFER = (
    "USE1-DataTransfer-Out-Bytes",
    "USE1-DataTransfer-Regional-Bytes",
    "USE1-USW2-AWS-Out-Bytes",
    "USE1-APN1-AWS-Out-Bytes",
    "USE1-CloudFront-Out-Bytes",
)
TYPES = [t for t in bench_aws_cur.TYPES if t[2] is not None]  # the CUR bench's GPU types and their rates
TEAMS = bench_aws_cur.TEAMS
TAGS = ("team", "user_team")


def _sql_type(t: pa.DataType) -> str:
    if pa.types.is_map(t):
        return f"MAP(VARCHAR, {'DOUBLE' if pa.types.is_floating(t.item_type) else 'VARCHAR'})"
    if pa.types.is_timestamp(t):
        return "TIMESTAMP_MS"
    return "DOUBLE" if pa.types.is_floating(t) else "VARCHAR"


def sql_list(values: Any) -> str:
    """A DuckDB list literal of ``values`` (strings quoted, numbers as written)."""
    return "[" + ", ".join(f"'{v}'" if isinstance(v, str) else str(v) for v in values) + "]"


def cur2_columns(exprs: dict[str, str]) -> str:
    """The SELECT list of a synthetic month of EC2 line items in the CUR 2.0 schema, from rows with
    ``inst`` (instance), ``h`` (hour of PERIOD), ``line``, ``compute``, ``gb`` and ``cost``: the columns
    both benches' months share, then ``exprs`` (their own), every other column NULL."""
    from gpufinops.ingest.aws.aws_cur2_format import CUR2_SCHEMA

    start = f"TIMESTAMP '{PERIOD}-01'"
    exprs = {
        "identity_line_item_id": "'li-' || inst || '-' || h || '-' || line",
        "bill_payer_account_id": "'012345678901'",
        "bill_billing_entity": "'AWS'",
        "bill_billing_period_start_date": start,
        "bill_billing_period_end_date": f"{start} + INTERVAL 1 MONTH",
        "line_item_line_item_type": "'Usage'",
        "line_item_product_code": "'AmazonEC2'",
        "line_item_usage_start_date": f"{start} + h * INTERVAL 1 HOUR",
        "line_item_usage_end_date": f"{start} + (h + 1) * INTERVAL 1 HOUR",
        "line_item_resource_id": "'i-0' || lpad(lower(to_hex(inst)), 16, '0')",
        "line_item_usage_amount": "CASE WHEN compute THEN 1.0 ELSE gb END",
        "line_item_currency_code": "'USD'",
        "line_item_unblended_cost": "cost",
        "pricing_unit": "CASE WHEN compute THEN 'Hrs' ELSE 'GB' END",
        "product_region_code": "'us-east-1'",
        "product_product_family": "CASE WHEN compute THEN 'Compute Instance' ELSE 'Data Transfer' END",
        "resource_tags": f"MAP {{'user_team': {sql_list(TEAMS)}[inst % {len(TEAMS)} + 1]}}",
        **exprs,
    }
    return ", ".join(f'CAST({exprs.get(f.name, "NULL")} AS {_sql_type(f.type)}) AS "{f.name}"' for f in CUR2_SCHEMA)


def _month_sql(first: int, last: int) -> str:
    """Every line of the month for instances [first, last), in the CUR 2.0 schema, generated in DuckDB
    (a numpy/Arrow generator took ~45 s per million rows here; this takes a few seconds)."""
    names, gpus, transfer = sql_list(t[0] for t in TYPES), sql_list(str(t[2]) for t in TYPES), sql_list(TRANSFER)
    rates = sql_list(t[1] for t in TYPES)
    transfer_rate = "[0.09, 0.01, 0.02, 0.09, 0.085]"
    k = len(TYPES)
    columns = cur2_columns(
        {
            "line_item_usage_account_id": "CASE WHEN inst % 2 = 0 THEN '023456789012' ELSE '004455667788' END",
            "line_item_usage_type": (
                f"CASE WHEN compute THEN (CASE WHEN spot THEN 'USE1-SpotUsage:' ELSE 'USE1-BoxUsage:' END)"
                f" || {names}[type_idx + 1] ELSE {transfer}[line] END"
            ),
            "line_item_unblended_rate": f"CASE WHEN compute THEN cost ELSE {transfer_rate}[line] END",
            "pricing_public_on_demand_cost": "CASE WHEN compute THEN rate ELSE cost END",
            "pricing_term": "CASE WHEN compute AND spot THEN 'Spot' ELSE 'OnDemand' END",
            "product": (
                f"CASE WHEN compute THEN MAP {{'product_name': 'Amazon Elastic Compute Cloud', "
                f"'region': 'us-east-1', 'instance_type': {names}[type_idx + 1], 'gpu': {gpus}[type_idx + 1]}} "
                f"ELSE MAP {{'product_name': 'Amazon Elastic Compute Cloud', 'region': 'us-east-1'}} END"
            ),
        }
    )
    return f"""
        WITH base AS (
            SELECT inst, h, line, inst % {k} AS type_idx, inst % 4 = 1 AS spot, line = 0 AS compute,
                   {rates}[inst % {k} + 1] AS rate,
                   round(0.1 + (hash(inst, h, line) % 499000) / 10000.0, 6) AS gb
            FROM range({first}, {last}) i(inst), range({HOURS}) hh(h), range({LINES_PER_HOUR}) ll(line)),
        priced AS (
            SELECT *, CASE WHEN compute THEN (CASE WHEN spot THEN round(rate * 0.35, 6) ELSE rate END)
                           ELSE round(gb * {transfer_rate}[line], 8) END AS cost FROM base)
        SELECT {columns} FROM priced ORDER BY inst, h, line"""


def generate(root: str, rows: int) -> int:
    """One delivery (Parquet files of 1M line items + manifest) of ``rows`` line items, cached."""
    import duckdb

    from gpufinops.ingest.aws.aws_cur2_format import write_manifest

    path = Path(root)
    instances = rows // (HOURS * LINES_PER_HOUR)
    if (path / "COMPLETE").exists():
        return instances * HOURS * LINES_PER_HOUR
    shutil.rmtree(path, ignore_errors=True)
    data_dir = path / EXPORT / "data" / f"BILLING_PERIOD={PERIOD}"
    data_dir.mkdir(parents=True)
    per_file = 224  # instances per file: 999,936 line items
    con = duckdb.connect()
    keys = []
    for number, first in enumerate(range(0, instances, per_file), start=1):
        name = f"{EXPORT}-{number:05d}.snappy.parquet"
        con.execute(
            f"COPY ({_month_sql(first, min(first + per_file, instances))}) TO '{data_dir / name}' "
            "(FORMAT parquet, COMPRESSION snappy, ROW_GROUP_SIZE 131072)"
        )
        keys.append(f"s3://billing/{EXPORT}/data/BILLING_PERIOD={PERIOD}/{name}")
    write_manifest(path, EXPORT, PERIOD, keys, str(uuid.uuid4()))
    (path / "COMPLETE").write_text(str(rows))
    return instances * HOURS * LINES_PER_HOUR


def load_local(root: str, db_path: str) -> dict[str, Any]:
    from gpufinops.ingest.core.registry import default_registry
    from gpufinops.ingest.core.runner import run_source

    result = run_source(
        default_registry(), db_path, SOURCE, "aws_cur", {"path": root, "format": "cur2"}, team_tag_keys=TAGS
    )
    if result.status != "succeeded":
        raise RuntimeError(f"local load ended {result.status}: {result.error}")
    from gpufinops.warehouse import db

    with db.writer(db_path) as con:
        con.execute("CHECKPOINT")
    return {"rows": result.rows, "db_mib": round(Path(db_path).stat().st_size / 2**20, 1)}


def rollup_remote(root: str, out: str) -> dict[str, Any]:
    """The Athena query's work, done by DuckDB over the same files (the Trino text read back), its
    result written as text columns — what GetQueryResults would transfer — to Parquet (streamed)."""
    import duckdb

    from gpufinops.ingest.aws import aws_athena
    from gpufinops.ingest.core import pushdown

    files = sorted(str(p) for p in Path(root).rglob("*.parquet"))
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET memory_limit = '6GB'")
    con.execute(f"SET temp_directory = '{Path(out).parent / 'pushdown_tmp'}'")
    con.execute("CREATE SCHEMA cur_db")
    con.execute(f"CREATE VIEW cur_db.cur AS SELECT *, '{PERIOD}' AS billing_period FROM read_parquet({files!r})")
    text = aws_athena.rollup_query('"cur_db"', '"cur"', [PERIOD], TAGS)
    back = pushdown.back_to_duckdb(text, "athena")
    cols = con.sql(back).columns
    as_text = ", ".join(f'CAST("{c}" AS VARCHAR) AS "{c}"' for c in cols)
    con.execute(f"COPY (SELECT {as_text} FROM ({back})) TO '{out}' (FORMAT parquet)")
    rows = con.execute(f"SELECT count(*) FROM read_parquet('{out}')").fetchall()[0][0]
    csv_path = Path(out).with_suffix(".csv")
    con.execute(f"COPY (SELECT * FROM read_parquet('{out}')) TO '{csv_path}' (HEADER)")
    csv_mib = round(csv_path.stat().st_size / 2**20, 1)
    csv_path.unlink()
    return {"rows": rows, "csv_mib": csv_mib}


def load_rollup(rollup: str, db_path: str) -> dict[str, Any]:
    """Load the rollup rows (text, as GetQueryResults returns them) into a warehouse."""
    from gpufinops.ingest.core import pushdown
    from gpufinops.warehouse import db

    with db.writer(db_path) as con:
        con.execute(
            f"INSERT INTO cost_line_items BY NAME {pushdown.typed_rollup_select(f'read_parquet({chr(39)}{rollup}{chr(39)})')}"
        )
        rows = con.execute("SELECT count(*) FROM cost_line_items").fetchall()[0][0]
        con.execute("CHECKPOINT")
    return {"rows": rows, "db_mib": round(Path(db_path).stat().st_size / 2**20, 1)}


def run(rows: int, results_file: Path | None = RESULTS_FILE) -> int:
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    root = CACHE_DIR / f"pushdown_cur2_{rows}"
    print(
        format_line(
            measure_in_subprocess(
                "generate CUR 2.0 month", "bench.bench_pushdown:generate", {"root": str(root), "rows": rows}
            )
        ),
        flush=True,
    )
    local_db = CACHE_DIR / "warehouse_pushdown_local.duckdb"
    remote_db = CACHE_DIR / "warehouse_pushdown_rollup.duckdb"
    rollup_file = CACHE_DIR / "pushdown_rollup.parquet"
    for stale in (local_db, remote_db, rollup_file):
        stale.unlink(missing_ok=True)
        stale.with_name(stale.name + ".wal").unlink(missing_ok=True)
    local = measure_in_subprocess(
        "local: load every line item", "bench.bench_pushdown:load_local", {"root": str(root), "db_path": str(local_db)}
    )
    report(local, results_file=results_file)
    remote = measure_in_subprocess(
        "push-down: rollup query", "bench.bench_pushdown:rollup_remote", {"root": str(root), "out": str(rollup_file)}
    )
    report(remote, results_file=results_file)
    loaded = measure_in_subprocess(
        "push-down: load the rollup rows",
        "bench.bench_pushdown:load_rollup",
        {"rollup": str(rollup_file), "db_path": str(remote_db)},
    )
    report(loaded, results_file=results_file)
    print(
        f"{'':<34} line items {local['rows']:,d} → rollup rows {remote['rows']:,d} "
        f"({local['rows'] / max(remote['rows'], 1):.1f}× fewer, ~{remote['csv_mib']:,.0f} MiB as CSV); "
        f"warehouse {local['db_mib']:,.0f} MiB local vs {loaded['db_mib']:,.0f} MiB from the rollup",
        flush=True,
    )
    for leftover in (local_db, remote_db, rollup_file):
        leftover.unlink(missing_ok=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    return rows_main(argv, __doc__, run, DEFAULT_ROWS, QUICK_ROWS)


if __name__ == "__main__":
    sys.exit(main())
