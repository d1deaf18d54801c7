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

import argparse
import shutil
import sys
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bench.harness import format_line, measure_in_subprocess, report

CACHE_DIR = Path(__file__).resolve().parent / ".cache"
RESULTS_FILE = CACHE_DIR / "results.jsonl"
DEFAULT_ROWS, QUICK_ROWS = 50_000_000, 600_000
PERIOD, EXPORT, SOURCE = "2026-10", "cur2", "bench_pushdown"
HOURS = 744
LINES_PER_HOUR = 6  # one compute line + five data-transfer lines per instance-hour
TRANSFER = ("USE1-DataTransfer-Out-Bytes", "USE1-DataTransfer-Regional-Bytes", "USE1-USW2-AWS-Out-Bytes",
            "USE1-APN1-AWS-Out-Bytes", "USE1-CloudFront-Out-Bytes")
TYPES = [("p4d.24xlarge", 21.957642, 8), ("p5.48xlarge", 55.04, 8), ("g5.xlarge", 1.006, 1),
         ("g5.12xlarge", 5.672, 4), ("g6.xlarge", 0.8048, 1), ("g4dn.xlarge", 0.526, 1)]
TEAMS = ["research", "vision", "nlp", "platform", "ml-prod"]
TAGS = ("team", "user_team")


def _chunk(instances: np.ndarray, rng: np.random.Generator) -> pa.Table:
    """Every line of the month for the given instance indexes."""
    from ingest.aws_cur2_format import conform

    start = datetime.strptime(PERIOD, "%Y-%m")
    n_inst = len(instances)
    inst = np.repeat(instances, HOURS * LINES_PER_HOUR)
    hour = np.tile(np.repeat(np.arange(HOURS), LINES_PER_HOUR), n_inst)
    line = np.tile(np.arange(LINES_PER_HOUR), n_inst * HOURS)
    n = len(inst)
    type_idx = inst % len(TYPES)
    spot = (inst % 4) == 1
    rate = np.array([t[1] for t in TYPES])[type_idx]
    compute = line == 0
    gb = np.round(rng.uniform(0.1, 50.0, n), 6)
    transfer_rate = np.array([0.09, 0.01, 0.02, 0.09, 0.085])[np.maximum(line - 1, 0)]
    cost = np.where(compute, np.where(spot, np.round(rate * 0.35, 6), rate), np.round(gb * transfer_rate, 8))
    usage_start = pa.array((np.datetime64(start, "ms") + hour.astype("timedelta64[h]")).astype("datetime64[ms]"))
    names = np.array([t[0] for t in TYPES])[type_idx]
    usage_type = np.where(compute, np.where(spot, "USE1-SpotUsage:", "USE1-BoxUsage:").astype(object) + names.astype(object),
                          np.array(TRANSFER, dtype=object)[np.maximum(line - 1, 0)])
    products = pa.array([[("product_name", "Amazon Elastic Compute Cloud"), ("region", "us-east-1"),
                          ("instance_type", name)] + [("gpu", str(g))] for name, _, g in TYPES]
                        + [[("product_name", "Amazon Elastic Compute Cloud"), ("region", "us-east-1")]],
                        type=pa.map_(pa.string(), pa.string()))
    product_idx = np.where(compute, type_idx, len(TYPES))
    tags = pa.array([[("user_team", t)] for t in TEAMS], type=pa.map_(pa.string(), pa.string()))
    resource_ids = np.array([f"i-0{i:016x}" for i in instances])
    return conform({
        "identity_line_item_id": pa.array(np.char.add("li-", np.arange(n).astype(str))),
        "bill_payer_account_id": pa.array(["012345678901"] * n), "bill_billing_entity": pa.array(["AWS"] * n),
        "bill_billing_period_start_date": pa.array([start] * n, pa.timestamp("ms")),
        "bill_billing_period_end_date": pa.array([start.replace(month=start.month % 12 + 1)] * n, pa.timestamp("ms")),
        "line_item_usage_account_id": pa.array(np.array(["023456789012", "004455667788"])[inst % 2]),
        "line_item_line_item_type": pa.array(["Usage"] * n), "line_item_product_code": pa.array(["AmazonEC2"] * n),
        "line_item_usage_type": pa.array(usage_type.astype(str)),
        "line_item_usage_start_date": usage_start,
        "line_item_usage_end_date": pc.add(usage_start, pa.scalar(timedelta(hours=1), pa.duration("ms"))),
        "line_item_resource_id": pa.array(np.repeat(resource_ids, HOURS * LINES_PER_HOUR)),
        "line_item_usage_amount": pa.array(np.where(compute, 1.0, gb)), "line_item_currency_code": pa.array(["USD"] * n),
        "line_item_unblended_cost": pa.array(cost), "line_item_unblended_rate": pa.array(np.where(compute, cost, transfer_rate)),
        "pricing_public_on_demand_cost": pa.array(np.where(compute, rate, cost)),
        "pricing_unit": pa.array(np.where(compute, "Hrs", "GB")),
        "pricing_term": pa.array(np.where(compute & spot, "Spot", "OnDemand")),
        "product_region_code": pa.array(["us-east-1"] * n),
        "product_product_family": pa.array(np.where(compute, "Compute Instance", "Data Transfer")),
        "product": products.take(pa.array(product_idx)), "resource_tags": tags.take(pa.array(inst % len(TEAMS))),
    })


def generate(root: str, rows: int, seed: int = 5) -> int:
    from ingest.aws_cur2_format import write_delivery

    path = Path(root)
    if (path / "COMPLETE").exists():
        return rows
    shutil.rmtree(path, ignore_errors=True)
    instances = rows // (HOURS * LINES_PER_HOUR)
    rng = np.random.default_rng(seed)
    per_file = 224  # instances per file: 1,000,000 line items
    tables = (_chunk(np.arange(i, min(i + per_file, instances)), rng) for i in range(0, instances, per_file))
    write_delivery(path, EXPORT, PERIOD, tables, execution_id=str(uuid.uuid4()))
    (path / "COMPLETE").write_text(str(rows))
    return instances * HOURS * LINES_PER_HOUR


def load_local(root: str, db_path: str) -> dict[str, Any]:
    from ingest.registry import default_registry
    from ingest.runner import run_source

    result = run_source(default_registry(), db_path, SOURCE, "aws_cur", {"path": root, "format": "cur2"},
                        team_tag_keys=TAGS)
    if result.status != "succeeded":
        raise RuntimeError(f"local load ended {result.status}: {result.error}")
    from warehouse import db
    with db.writer(db_path) as con:
        con.execute("CHECKPOINT")
    return {"rows": result.rows, "db_mib": round(Path(db_path).stat().st_size / 2**20, 1)}


def rollup_remote(root: str, out: str) -> dict[str, Any]:
    """The Athena query's work, done by DuckDB over the same files (the Trino text read back)."""
    import duckdb
    import pyarrow.parquet as pq

    from ingest import aws_athena, pushdown

    files = sorted(str(p) for p in Path(root).rglob("*.parquet"))
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("CREATE SCHEMA cur_db")
    con.execute(f"CREATE VIEW cur_db.cur AS SELECT *, '{PERIOD}' AS billing_period FROM read_parquet({files!r})")
    text = aws_athena.rollup_query('"cur_db"', '"cur"', [PERIOD], TAGS)
    back = pushdown.back_to_duckdb(text, "athena")
    cols = con.sql(back).columns
    as_text = con.sql(f"SELECT {', '.join(f'CAST({chr(34)}{c}{chr(34)} AS VARCHAR) AS {chr(34)}{c}{chr(34)}' for c in cols)} "
                      f"FROM ({back})").to_arrow_table()
    pq.write_table(as_text, out)
    csv_bytes = sum(len(",".join(v or "" for v in row)) + 1 for row in zip(*(c.to_pylist() for c in as_text.columns)))
    return {"rows": as_text.num_rows, "csv_mib": round(csv_bytes / 2**20, 1)}


def load_rollup(rollup: str, db_path: str) -> dict[str, Any]:
    """Load the rollup rows (text, as GetQueryResults returns them) into a warehouse."""
    import pyarrow.parquet as pq

    from ingest import pushdown
    from warehouse import db

    table = pq.read_table(rollup)
    with db.writer(db_path) as con:
        con.register("athena_result", table)
        con.execute(f"INSERT INTO cost_line_items BY NAME {pushdown.typed_rollup_select('athena_result')}")
        con.execute("CHECKPOINT")
    return {"rows": table.num_rows, "db_mib": round(Path(db_path).stat().st_size / 2**20, 1)}


def run(rows: int, results_file: Path | None = RESULTS_FILE) -> int:
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    root = CACHE_DIR / f"pushdown_cur2_{rows}"
    print(format_line(measure_in_subprocess("generate CUR 2.0 month", "bench.bench_pushdown:generate",
                                            {"root": str(root), "rows": rows})), flush=True)
    local_db = CACHE_DIR / "warehouse_pushdown_local.duckdb"
    remote_db = CACHE_DIR / "warehouse_pushdown_rollup.duckdb"
    rollup_file = CACHE_DIR / "pushdown_rollup.parquet"
    for stale in (local_db, remote_db, rollup_file):
        stale.unlink(missing_ok=True)
        stale.with_name(stale.name + ".wal").unlink(missing_ok=True)
    local = measure_in_subprocess("local: load every line item", "bench.bench_pushdown:load_local",
                                  {"root": str(root), "db_path": str(local_db)})
    report(local, results_file=results_file)
    remote = measure_in_subprocess("push-down: rollup query", "bench.bench_pushdown:rollup_remote",
                                   {"root": str(root), "out": str(rollup_file)})
    report(remote, results_file=results_file)
    loaded = measure_in_subprocess("push-down: load the rollup rows", "bench.bench_pushdown:load_rollup",
                                   {"rollup": str(rollup_file), "db_path": str(remote_db)})
    report(loaded, results_file=results_file)
    print(f"{'':<34} line items {local['rows']:,d} → rollup rows {remote['rows']:,d} "
          f"({local['rows'] / max(remote['rows'], 1):.1f}× fewer, ~{remote['csv_mib']:,.0f} MiB as CSV); "
          f"warehouse {local['db_mib']:,.0f} MiB local vs {loaded['db_mib']:,.0f} MiB from the rollup", flush=True)
    for leftover in (local_db, remote_db, rollup_file):
        leftover.unlink(missing_ok=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, help=f"line items (default {DEFAULT_ROWS:,d})")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_ROWS:,d} rows")
    args = parser.parse_args(argv)
    return run(args.rows or (QUICK_ROWS if args.quick else DEFAULT_ROWS))


if __name__ == "__main__":
    sys.exit(main())
