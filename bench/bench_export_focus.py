"""Benchmark: ``gpufinops export focus`` of a 10M-row warehouse to FOCUS 1.2 Parquet.

A warehouse holding ``rows`` FOCUS 1.2 line items (bench/focus_data.py's fleet, all 57 columns plus
the x_ extensions) is built once and cached in ``bench/.cache/``. Then, each in a fresh process so
its peak RSS is its own:

0. DuckDB's floor: ``COPY (SELECT * FROM cost_line_items) TO '…parquet'`` on a read-only connection
   with the same settings (zstd, 122,880-row groups, insertion order not kept);
1. ``export focus``: :func:`jobs.export.focus.export` (spec column order, JSON as text, the file
   written beside ``--out`` and renamed), read back to check its row count.

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


def export_focus(db_path: str, out: str) -> dict[str, Any]:
    """What ``gpufinops export focus --out OUT`` does."""
    from gpufinops.jobs.export import focus
    from gpufinops.warehouse import db

    with db.reader(db_path, memory_limit=MEMORY_LIMIT) as con:
        return {"rows": focus.export(con, out, "parquet")}


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
    if written != rows or figure["rows"] != rows:
        print(
            f"export focus wrote {figure['rows']:,d} rows ({written:,d} read back), expected {rows:,d}", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
