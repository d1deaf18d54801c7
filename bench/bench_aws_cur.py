"""Benchmark: loading CUR 2.0 Parquet deliveries (local bucket layout) through ``aws_cur`` with the FOCUS mapping.

Generates (or reuses from ``bench/.cache/``) one billing period of N CUR 2.0 line items in the CUR 2.0
schema (``product`` / ``resource_tags`` maps, on-demand, spot, Reserved Instance and Savings Plan
lines) as 1M-row Parquet files with their manifest, then, each in a fresh process:

1. a first load into an empty warehouse, and
2. a re-delivery: AWS writes the period again (new manifest, same data), so ``aws_cur`` replaces the
   whole period (delete + insert in one transaction); the row count must stay N.

Targets: ≥ 500k rows/s end to end, peak RSS < 6 GiB, re-delivery ≤ 1.5× the first load. A missed
target prints FAIL with exit status 0 (figures, not tests); a failed or duplicating load exits 1.

    python -m bench.bench_aws_cur             # 10M rows
    python -m bench.bench_aws_cur --quick     # 200k rows
"""

from __future__ import annotations

import json
import sys
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bench.harness import Target, format_line, measure_in_subprocess, report, reuse_or_clear, rows_main

CACHE_DIR = Path(__file__).resolve().parent / ".cache"
RESULTS_FILE = CACHE_DIR / "results.jsonl"
DEFAULT_ROWS, QUICK_ROWS, FILE_ROWS = 10_000_000, 200_000, 1_000_000
PERIOD, EXPORT, SOURCE = "2026-10", "cur2", "bench_cur"
TARGETS = [Target("rows_per_s", ">=", 500_000, "≥ 500k rows/s"), Target("peak_rss_mib", "<", 6144, "RSS < 6 GiB")]
RELOAD_TARGET = Target("reload_ratio", "<=", 1.5, "re-delivery ≤ 1.5× first")
TYPES = [
    ("p4d.24xlarge", 21.957642, 8),
    ("p5.48xlarge", 55.04, 8),
    ("g5.xlarge", 1.006, 1),
    ("g5.12xlarge", 5.672, 4),
    ("g6.xlarge", 0.8048, 1),
    ("g4dn.xlarge", 0.526, 1),
    ("m5.large", 0.096, None),
]
TEAMS = ["research", "vision", "nlp", "platform", "ml-prod"]
NULL_OBJECT = np.array(None, dtype=object)  # np.where's "no ARN": a null in the object array


def _maps(entries: list[list[tuple[str, str]]]) -> pa.Array:
    return pa.array(entries, type=pa.map_(pa.string(), pa.string()))


def _chunk(rng: np.random.Generator, n: int, offset: int) -> pa.Table:
    from gpufinops.ingest.aws.aws_cur2_format import conform

    start = datetime.strptime(PERIOD, "%Y-%m")
    kind = rng.choice(4, n, p=[0.70, 0.15, 0.10, 0.05])  # on-demand, spot, RI, Savings Plan
    type_idx = rng.integers(0, len(TYPES), n)
    rate = np.array([t[1] for t in TYPES])[type_idx]
    on_demand = np.round(rate, 6)
    spot = np.round(rate * rng.uniform(0.3, 0.4, n), 4)
    unblended = np.where(kind == 0, on_demand, np.where(kind == 1, spot, np.where(kind == 2, 0.0, on_demand)))
    committed = np.round(rate * 0.62, 10)
    hours = rng.integers(0, 24 * 31, n)
    usage_start = pa.array((np.datetime64(start, "ms") + hours.astype("timedelta64[h]")).astype("datetime64[ms]"))
    resource = rng.integers(0, 5000, n)
    products = _maps(
        [
            [("product_name", "Amazon Elastic Compute Cloud"), ("region", "us-east-1"), ("instance_type", name)]
            + ([("gpu", str(g))] if g else [])
            for name, _, g in TYPES
        ]
    )
    tags = _maps([[("user_team", team), ("user_workload", "training")] for team in TEAMS])
    line_type = np.array(["Usage", "Usage", "DiscountedUsage", "SavingsPlanCoveredUsage"])[kind]
    names = np.array([t[0] for t in TYPES])[type_idx]
    usage_type = np.where(kind == 1, "USE1-SpotUsage:", "USE1-BoxUsage:").astype(object) + names.astype(object)
    return conform(
        {
            "identity_line_item_id": pa.array([f"li-{offset + i}" for i in range(n)]),
            "bill_payer_account_id": pa.array(["012345678901"] * n),
            "bill_billing_entity": pa.array(["AWS"] * n),
            "bill_billing_period_start_date": pa.array([start] * n, pa.timestamp("ms")),
            "bill_billing_period_end_date": pa.array(
                [start.replace(month=start.month % 12 + 1)] * n, pa.timestamp("ms")
            ),
            "line_item_usage_account_id": pa.array(np.array(["023456789012", "004455667788"])[resource % 2]),
            "line_item_line_item_type": pa.array(line_type),
            "line_item_product_code": pa.array(["AmazonEC2"] * n),
            "line_item_usage_type": pa.array(usage_type.astype(str)),
            "line_item_usage_start_date": usage_start,
            "line_item_usage_end_date": pc.add(usage_start, pa.scalar(timedelta(hours=1), pa.duration("ms"))),
            "line_item_resource_id": pa.array([f"i-0{r:016x}" for r in resource]),
            "line_item_usage_amount": pa.array(np.ones(n)),
            "line_item_currency_code": pa.array(["USD"] * n),
            "line_item_unblended_cost": pa.array(unblended),
            "line_item_unblended_rate": pa.array(unblended),
            "pricing_public_on_demand_cost": pa.array(on_demand),
            "pricing_public_on_demand_rate": pa.array(on_demand),
            "pricing_unit": pa.array(["Hrs"] * n),
            "product_instance_type": pa.array(names),
            "product_region_code": pa.array(["us-east-1"] * n),
            "product_product_family": pa.array(["Compute Instance"] * n),
            "reservation_effective_cost": pa.array(np.where(kind == 2, committed, np.nan), from_pandas=True),
            "reservation_reservation_a_r_n": pa.array(
                np.where(kind == 2, "arn:aws:ec2:us-east-1:012345678901:reserved-instances/r1", NULL_OBJECT)
            ),
            "savings_plan_savings_plan_effective_cost": pa.array(
                np.where(kind == 3, committed, np.nan), from_pandas=True
            ),
            "savings_plan_savings_plan_a_r_n": pa.array(
                np.where(kind == 3, "arn:aws:savingsplans::012345678901:savingsplan/s1", NULL_OBJECT)
            ),
            "product": products.take(pa.array(type_idx)),
            "resource_tags": tags.take(pa.array(resource % len(TEAMS))),
        }
    )


def generate(root: Path, rows: int, seed: int = 11) -> Path:
    """One delivery of ``rows`` line items under ``root`` (cached: reused when complete)."""
    from gpufinops.ingest.aws.aws_cur2_format import write_delivery

    done = root / "COMPLETE"
    if reuse_or_clear(root, done.name):
        return root
    rng = np.random.default_rng(seed)
    tables = (_chunk(rng, min(FILE_ROWS, rows - offset), offset) for offset in range(0, rows, FILE_ROWS))
    write_delivery(root, EXPORT, PERIOD, tables, execution_id=str(uuid.uuid4()))  # one 1M-row file at a time
    done.write_text(str(rows))
    return root


def generate_rows(root: str, rows: int) -> int:
    """``generate`` for measure_in_subprocess: the generator's memory stays out of this process's peak."""
    generate(Path(root), rows)
    return rows


def redeliver(root: Path) -> None:
    """AWS delivers the period again: a new manifest (new execution id) over the same files."""
    manifest = next((root / EXPORT / "metadata").rglob("*-Manifest.json"))
    content = json.loads(manifest.read_text())
    content["executionId"] = str(uuid.uuid4())
    manifest.write_text(json.dumps(content, indent=2))


def load_once(root: str, db_path: str) -> dict[str, Any]:
    """One ``aws_cur`` run in local-directory mode (runs in the measured child process)."""
    from gpufinops.ingest.core.registry import default_registry
    from gpufinops.ingest.core.runner import run_source

    result = run_source(
        default_registry(),
        db_path,
        SOURCE,
        "aws_cur",
        {"path": root, "format": "cur2"},
        team_tag_keys=("team", "user_team"),
    )
    if result.status != "succeeded":
        raise RuntimeError(f"aws_cur load of {root} ended {result.status}: {result.error}")
    return {"rows": result.rows}


def warehouse_rows(db_path: str) -> int:
    from gpufinops.warehouse import db

    with db.reader(db_path) as con:
        return con.execute("SELECT count(*) FROM cost_line_items WHERE x_Source = ?", [SOURCE]).fetchall()[0][0]


def run(rows: int, results_file: Path | None = RESULTS_FILE) -> int:
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    root = CACHE_DIR / f"aws_cur2_{rows}"
    # every step in its own process: a child inherits its parent's peak RSS (ru_maxrss) on Linux
    figure = measure_in_subprocess(
        "generate CUR 2.0 parquet", "bench.bench_aws_cur:generate_rows", {"root": str(root), "rows": rows}
    )
    print(format_line(figure), flush=True)
    db_path = CACHE_DIR / f"warehouse_aws_cur_{rows}.duckdb"
    for stale in (db_path, db_path.with_name(db_path.name + ".wal")):
        stale.unlink(missing_ok=True)
    first = measure_in_subprocess(
        "aws_cur CUR 2.0 first load", "bench.bench_aws_cur:load_once", {"root": str(root), "db_path": str(db_path)}
    )
    report(first, targets=TARGETS, results_file=results_file)
    after_first = warehouse_rows(str(db_path))
    redeliver(root)
    again = measure_in_subprocess(
        "aws_cur CUR 2.0 re-delivery", "bench.bench_aws_cur:load_once", {"root": str(root), "db_path": str(db_path)}
    )
    again["reload_ratio"] = round(again["seconds"] / first["seconds"], 2)
    report(again, targets=TARGETS + [RELOAD_TARGET], results_file=results_file)
    after_again = warehouse_rows(str(db_path))
    ok = after_first == rows == after_again
    print(
        f"{'':<34} rows in warehouse: {after_first:,d} after the first load, {after_again:,d} after the "
        f"re-delivery (expected {rows:,d}) {'OK' if ok else 'WRONG'}; re-delivery / first = {again['reload_ratio']:.2f}×",
        flush=True,
    )
    for leftover in (db_path, db_path.with_name(db_path.name + ".wal")):
        leftover.unlink(missing_ok=True)
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    return rows_main(argv, __doc__, run, DEFAULT_ROWS, QUICK_ROWS)


if __name__ == "__main__":
    sys.exit(main())
