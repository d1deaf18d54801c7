"""Benchmark: ``gpufinops export focus`` of a 10M-row warehouse to FOCUS 1.2 Parquet.

A warehouse holding ``rows`` FOCUS 1.2 line items (bench/focus_data.py's fleet, all 57 columns plus
the x_ extensions) is built once and cached in ``bench/.cache/``. Then, each in a fresh process so
its peak RSS is its own:

0. DuckDB's floor: ``COPY (SELECT * FROM cost_line_items) TO '…parquet'`` on a read-only connection
   with the same settings (zstd, 122,880-row groups, insertion order not kept);
1. ``export focus``: :func:`jobs.export.focus.export` (spec column order, JSON as text, the file
   written beside ``--out`` and renamed), read back to check its row count;
2. ``export focus --focus-version 1.3`` on a copy of the warehouse in which a tenth of the usage
   lines' resource-hours are shared GPUs (three ``gpu_allocation_hourly`` rows each: two pods and the
   unallocated share), so those lines are split into allocated rows.

Prints rows, seconds, rows/s, peak RSS and export / floor against the targets (≥ 1M rows/s,
peak RSS < 2 GiB). A missed target prints FAIL but exits 0 (figures, not tests); a wrong row count
is an error (exit 1).

    python -m bench.bench_export_focus            # 10M rows
    python -m bench.bench_export_focus --quick    # 100k rows
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from bench import focus_data
from bench.harness import Target, measure_in_subprocess, report

DEFAULT_ROWS = 10_000_000
QUICK_ROWS = 100_000
MEMORY_LIMIT = "1GB"
TARGETS = [Target("rows_per_s", ">=", 1_000_000, "≥ 1M rows/s"), Target("peak_rss_mib", "<", 2048, "RSS < 2 GiB")]


def warehouse_path(rows: int) -> Path:
    return focus_data.CACHE_DIR / f"export_focus_v{focus_data.GENERATOR_VERSION}_{rows}.duckdb"


def build_warehouse(db_path: str, rows: int) -> dict[str, Any]:
    """The benchmark's warehouse: ``rows`` generated line items in cost_line_items (runs in a child)."""
    from gpufinops.warehouse import db

    tmp = Path(db_path + ".tmp")
    tmp.unlink(missing_ok=True)
    with db.writer(tmp, memory_limit="2GB") as con:
        con.execute("SET preserve_insertion_order = false")
        con.execute(f"""INSERT INTO cost_line_items BY NAME SELECT *, 'bench' AS x_Source, 'g5.xlarge' AS x_InstanceType,
                        'A10G' AS x_GpuModel, 1 AS x_GpuCount FROM ({focus_data._cast_select(rows, "parquet")})""")
        count = con.execute("SELECT count(*) FROM cost_line_items").fetchall()[0][0]
        con.execute("CHECKPOINT")
    tmp.rename(db_path)
    return {"rows": count}


def copy_floor(db_path: str, out: str) -> dict[str, Any]:
    """DuckDB's own COPY of the table, same connection settings as the export."""
    from gpufinops.warehouse import db

    with db.reader(db_path, memory_limit=MEMORY_LIMIT) as con:
        con.execute("SET preserve_insertion_order = false")
        rows = con.execute(
            f"COPY (SELECT * FROM cost_line_items) TO '{out}' (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 122880)"
        ).fetchall()[0][0]
    return {"rows": rows}


def export_focus(db_path: str, out: str, version: str = "1.2") -> dict[str, Any]:
    """What ``gpufinops export focus [--focus-version VERSION] --out OUT`` does."""
    from gpufinops.jobs.export import focus
    from gpufinops.warehouse import db

    with db.reader(db_path, memory_limit=MEMORY_LIMIT) as con:
        return {"rows": focus.export(con, out, "parquet", version=version)}


def share_gpus(db_path: str, shared_path: str) -> dict[str, Any]:
    """A copy of the warehouse where a tenth of the usage lines' resource-hours carry allocation rows."""
    import shutil

    from gpufinops.warehouse import db

    tmp = Path(shared_path + ".tmp")
    shutil.copy(db_path, tmp)
    with db.writer(tmp, memory_limit="2GB") as con:
        con.execute("""INSERT INTO gpu_allocation_hourly BY NAME
            WITH hours AS (
              SELECT "ResourceId" AS resource_id, date_trunc('hour', "ChargePeriodStart") AS hour,
                     sum("EffectiveCost") AS cost
              FROM cost_line_items WHERE "ChargeCategory" = 'Usage' AND hash("ResourceId") % 10 = 0 GROUP BY 1, 2)
            SELECT h.hour, h.resource_id, 'GPU-' || h.resource_id AS gpu_uuid, p.namespace, p.pod, 'bench' AS team,
                   p.share, CAST(h.cost * p.share AS DECIMAL(38, 15)) AS cost_usd, p.basis, p.method, 'bench' AS source
            FROM hours h, (VALUES ('ml', 'train-0', 0.5, 'timeslice', 'equal'), ('ml', 'serve-0', 0.25, 'timeslice', 'equal'),
                                  (NULL, NULL, 0.25, 'unallocated', 'idle')) p(namespace, pod, share, basis, method)""")
        lines = con.execute("""SELECT count(*) FROM cost_line_items c SEMI JOIN gpu_allocation_hourly a
            ON a.resource_id = c."ResourceId" AND a.hour = date_trunc('hour', c."ChargePeriodStart")
            WHERE c."ChargeCategory" = 'Usage'""").fetchall()[0][0]
        con.execute("CHECKPOINT")
    tmp.rename(shared_path)
    return {"rows": lines}


def file_rows(path: str) -> int:
    import duckdb

    from gpufinops.warehouse.fetch import scalar

    return scalar(duckdb.execute(f"SELECT count(*) FROM read_parquet('{path}')"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_ROWS:,d} rows (a smoke run)")
    parser.add_argument("--rows", type=int)
    args = parser.parse_args(argv)
    rows = args.rows or (QUICK_ROWS if args.quick else DEFAULT_ROWS)
    db_path = warehouse_path(rows)
    if not db_path.exists():
        db_path.parent.mkdir(parents=True, exist_ok=True)
        report(
            measure_in_subprocess(
                "export focus: build warehouse",
                "bench.bench_export_focus:build_warehouse",
                {"db_path": str(db_path), "rows": rows},
            )
        )
    out_dir = focus_data.CACHE_DIR
    floor = measure_in_subprocess(
        "export focus: DuckDB COPY floor",
        "bench.bench_export_focus:copy_floor",
        {"db_path": str(db_path), "out": str(out_dir / "floor.parquet")},
    )
    report(floor)
    figure = measure_in_subprocess(
        "export focus (parquet)",
        "bench.bench_export_focus:export_focus",
        {"db_path": str(db_path), "out": str(out_dir / "export.parquet")},
    )
    figure["vs_floor"] = round(figure["seconds"] / floor["seconds"], 2)
    report(figure, targets=TARGETS)
    written = file_rows(str(out_dir / "export.parquet"))
    sizes = {p: round((out_dir / p).stat().st_size / 2**20) for p in ("floor.parquet", "export.parquet")}
    print(
        f"{'':<34} export / floor = {figure['vs_floor']:.2f}× (floor {floor['rows_per_s']:,d} rows/s); "
        f"file {sizes['export.parquet']:,d} MiB (floor's {sizes['floor.parquet']:,d} MiB); "
        f"{written:,d} rows read back",
        flush=True,
    )
    for name in sizes:
        (out_dir / name).unlink(missing_ok=True)
    shared = db_path.with_name(db_path.stem + "_shared.duckdb")
    if not shared.exists():
        made = measure_in_subprocess(
            "export focus: share a tenth of the GPU-hours",
            "bench.bench_export_focus:share_gpus",
            {"db_path": str(db_path), "shared_path": str(shared)},
        )
        report(made)
    v13 = measure_in_subprocess(
        "export focus --focus-version 1.3",
        "bench.bench_export_focus:export_focus",
        {"db_path": str(shared), "out": str(out_dir / "export13.parquet"), "version": "1.3"},
    )
    v13["vs_floor"] = round(v13["seconds"] / floor["seconds"], 2)
    report(v13, targets=TARGETS)
    split = v13["rows"] - rows
    print(
        f"{'':<34} 1.3 / floor = {v13['vs_floor']:.2f}×, 1.3 / 1.2 = {v13['seconds'] / figure['seconds']:.2f}×; "
        f"{v13['rows']:,d} rows ({split:,d} more: shared lines split into their allocated rows)",
        flush=True,
    )
    (out_dir / "export13.parquet").unlink(missing_ok=True)
    if written != rows or figure["rows"] != rows:
        print(
            f"export focus wrote {figure['rows']:,d} rows ({written:,d} read back), expected {rows:,d}", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
