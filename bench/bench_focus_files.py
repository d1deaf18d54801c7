"""Benchmark: loading FOCUS 1.2 exports (Parquet and CSV) through ``focus_files`` into the warehouse.

For each size and format: generate (or reuse from ``bench/.cache/``) a FOCUS 1.2 file, then, each
in a fresh process so that its peak RSS is its own,

0. DuckDB's floor: ``CREATE TABLE AS SELECT *`` from the file (read as focus_files reads it),
1. a first load into an empty warehouse (``ingest.core.runner.run_source``), and
2. an idempotent re-load of the same file with ``full_refresh=True``, which must replace the
   billing-period slice, not duplicate it (the row count afterwards must equal the file's).

Prints rows, seconds, rows/s, peak RSS, CPU seconds, load / floor and re-load / first-load against the targets
(Parquet ≥ 1M rows/s, CSV ≥ 400k rows/s, re-load ≤ 1.5× first load, peak RSS < 4 GiB). A missed
target prints FAIL but the exit status stays 0: these are figures, not tests. A load that fails or
duplicates rows is an error (exit 1).

    python -m bench.bench_focus_files             # 1M and 10M rows
    python -m bench.bench_focus_files --quick     # 100k rows
    python -m bench.bench_focus_files --rows 2000000 --formats csv
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from bench import focus_data
from bench.harness import Target, check_targets, format_line, measure_in_subprocess, report

DEFAULT_SIZES = (1_000_000, 10_000_000)
QUICK_SIZE = 100_000
FORMATS = ("parquet", "csv")
SOURCE = "bench"
RESULTS_FILE = focus_data.CACHE_DIR / "results.jsonl"

ROWS_PER_S_TARGET = {"parquet": 1_000_000, "csv": 400_000}
RELOAD_RATIO_TARGET = 1.5
PEAK_RSS_TARGET_MIB = 4096


def load_targets(fmt: str) -> list[Target]:
    rate = ROWS_PER_S_TARGET[fmt]
    return [
        Target("rows_per_s", ">=", rate, f"≥ {rate / 1e6:g}M rows/s" if rate >= 1e6 else f"≥ {rate // 1000}k rows/s"),
        Target("peak_rss_mib", "<", PEAK_RSS_TARGET_MIB, "RSS < 4 GiB"),
    ]


RELOAD_TARGETS = [Target("reload_ratio", "<=", RELOAD_RATIO_TARGET, f"re-load ≤ {RELOAD_RATIO_TARGET}× first")]


def load_once(path: str, db_path: str, full_refresh: bool) -> dict[str, Any]:
    """One ``focus_files`` run (runs in the measured child process)."""
    from gpufinops.ingest.core.focus_files import FocusFiles
    from gpufinops.ingest.core.registry import Registry
    from gpufinops.ingest.core.runner import run_source

    registry = Registry()
    registry.register(FocusFiles)
    result = run_source(registry, db_path, SOURCE, "focus_files", {"path": path}, full_refresh=full_refresh)
    if result.status != "succeeded":
        raise RuntimeError(
            f"load {'(full refresh) ' if full_refresh else ''}of {path} ended {result.status}: {result.error}"
        )
    return {"rows": result.rows, "db_file_mib": round(_db_bytes(db_path) / 2**20, 1)}


def _db_bytes(db_path: str) -> int:
    return sum(os.path.getsize(p) for p in (db_path, db_path + ".wal") if os.path.exists(p))


def warehouse_rows(db_path: str) -> int:
    from gpufinops.warehouse import db
    from gpufinops.warehouse.fetch import scalar

    with db.reader(db_path) as con:
        return scalar(con.execute("SELECT count(*) FROM cost_line_items WHERE x_Source = ?", [SOURCE]))


def _fresh_warehouse(fmt: str, rows: int, work_dir: Path) -> str:
    db_path = work_dir / f"warehouse_{fmt}_{rows}.duckdb"
    for stale in (db_path, db_path.with_name(db_path.name + ".wal")):
        stale.unlink(missing_ok=True)
    shutil.rmtree(work_dir / ".duckdb_tmp", ignore_errors=True)
    return str(db_path)


def generate_file(path: str, rows: int, fmt: str) -> dict[str, Any]:
    """Write the benchmark input (runs in a measured child process)."""
    focus_data.generate(path, rows, fmt)
    return {"rows": rows, "file_mib": round(os.path.getsize(path) / 2**20, 1)}


def ctas_floor(path: str, db_path: str) -> dict[str, Any]:
    """DuckDB's own floor: ``CREATE TABLE AS SELECT *`` from the file, read the way focus_files reads it.

    Same connection settings as a load (``warehouse.db.writer``: UTC, memory limit, temp directory),
    no casts, no derived columns, no ledger: what a load is compared with (docs/benchmarks.md).
    """
    from gpufinops.ingest.core import focus_files
    from gpufinops.warehouse import db

    relation = getattr(focus_files, "_source_relation", None)
    if relation is None:  # the reader options focus_files used when this benchmark was written

        def relation(p: str) -> str:
            if p.endswith(".parquet"):
                return f"read_parquet('{p}')"
            return (
                f"read_csv('{p}', header = true, all_varchar = true, nullstr = ['NULL', ''], "
                f"quote = '\"', escape = '\"', auto_detect = true, strict_mode = true)"
            )

    with db.writer(db_path) as con:
        con.execute(f"CREATE TABLE ctas_floor AS SELECT * FROM {relation(path)}")
        rows = con.execute("SELECT count(*) FROM ctas_floor").fetchall()[0][0]
    return {"rows": rows, "db_file_mib": round(_db_bytes(db_path) / 2**20, 1)}


def _generate(rows: int, fmt: str, results_file: Path | None) -> Path:
    path = focus_data.cache_path(rows, fmt)
    if path.exists():
        print(
            f"{'generate ' + fmt:<34} rows {rows:>12,d}  cached {path.name} ({path.stat().st_size / 2**20:,.0f} MiB)",
            flush=True,
        )
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    figure = measure_in_subprocess(
        f"generate {fmt}", "bench.bench_focus_files:generate_file", {"path": str(path), "rows": rows, "fmt": fmt}
    )
    figure.update(format=fmt, size=rows, phase="generate")
    report(figure, results_file=results_file, quiet=True)
    print(format_line(figure) + f"   {figure['file_mib']:,.0f} MiB", flush=True)
    return path


def bench_one(
    rows: int, fmt: str, *, work_dir: Path, results_file: Path | None, keep: bool, repeat: int = 1, floor: bool = True
) -> tuple[list[dict[str, Any]], list[str]]:
    """Generate, then load and re-load one (size, format) ``repeat`` times.

    Returns (figures, correctness errors). Each repetition starts from an empty warehouse.
    """
    errors: list[str] = []
    figures: list[dict[str, Any]] = []
    path = _generate(rows, fmt, results_file)
    common = {"format": fmt, "size": rows, "file": path.name, "file_mib": round(path.stat().st_size / 2**20, 1)}
    if floor:
        db_path = _fresh_warehouse(fmt, rows, work_dir)
        figure = measure_in_subprocess(
            f"{fmt} CTAS floor (SELECT *)",
            "bench.bench_focus_files:ctas_floor",
            {"path": str(path), "db_path": db_path},
        )
        figure.update(common, phase="floor")
        report(figure, results_file=results_file)
        figures.append(figure)
        if not keep:
            for leftover in (Path(db_path), Path(db_path + ".wal")):
                leftover.unlink(missing_ok=True)
    for attempt in range(1, repeat + 1):
        tag = f" #{attempt}" if repeat > 1 else ""
        db_path = _fresh_warehouse(fmt, rows, work_dir)
        first = measure_in_subprocess(
            f"{fmt} first load{tag}",
            "bench.bench_focus_files:load_once",
            {"path": str(path), "db_path": db_path, "full_refresh": False},
        )
        first.update(common, phase="first", attempt=attempt)
        report(first, targets=load_targets(fmt), results_file=results_file)
        after_first = warehouse_rows(db_path)

        reload = measure_in_subprocess(
            f"{fmt} re-load (full_refresh){tag}",
            "bench.bench_focus_files:load_once",
            {"path": str(path), "db_path": db_path, "full_refresh": True},
        )
        after_reload = warehouse_rows(db_path)
        reload.update(
            common,
            phase="reload",
            attempt=attempt,
            rows_after=after_reload,
            reload_ratio=round(reload["seconds"] / first["seconds"], 2),
        )
        report(reload, targets=load_targets(fmt) + RELOAD_TARGETS, results_file=results_file)

        ok = after_first == rows and after_reload == rows
        print(
            f"{'':<34} rows in warehouse: {after_first:,d} after first load, {after_reload:,d} after re-load "
            f"(expected {rows:,d}) {'OK' if ok else 'WRONG'};  re-load / first = {reload['reload_ratio']:.2f}×;  "
            f"warehouse file {first['db_file_mib']:,.0f} → {reload['db_file_mib']:,.0f} MiB",
            flush=True,
        )
        if not ok:
            errors.append(
                f"{fmt} {rows:,d}: {after_first:,d} rows after the first load and {after_reload:,d} "
                f"after the re-load, expected {rows:,d}"
            )
        figures += [first, reload]
        if not keep:
            for leftover in (Path(db_path), Path(db_path + ".wal")):
                leftover.unlink(missing_ok=True)
    return figures, errors


def summary(figures: list[dict[str, Any]]) -> list[str]:
    """One line per (size, format, phase): the best (fastest) repetition, checked against the targets."""
    lines = [
        f"{'format':<8} {'phase':<7} {'rows':>12} {'seconds':>8} {'rows/s':>11} {'peak RSS MiB':>12} "
        f"{'cpu s':>7} {'vs floor':>8} {'reload/first':>12}  targets"
    ]
    phases = ("floor", "first", "reload")
    keys = sorted(
        {(f["size"], f["format"], f["phase"]) for f in figures},
        key=lambda k: (k[0], FORMATS.index(k[1]), phases.index(k[2])),
    )
    for size, fmt, phase in keys:
        runs = [f for f in figures if (f["size"], f["format"], f["phase"]) == (size, fmt, phase)]
        best = dict(min(runs, key=lambda f: f["seconds"]))
        best["peak_rss_mib"] = max(f["peak_rss_mib"] for f in runs)
        if phase == "reload":
            firsts = [f for f in figures if (f["size"], f["format"], f["phase"]) == (size, fmt, "first")]
            best["reload_ratio"] = round(best["seconds"] / min(f["seconds"] for f in firsts), 2)
        floors = [f for f in figures if (f["size"], f["format"], f["phase"]) == (size, fmt, "floor")]
        vs_floor = f"{best['seconds'] / floors[0]['seconds']:.2f}×" if floors and phase != "floor" else ""
        best["checks"] = []
        checks = (
            []
            if phase == "floor"
            else check_targets(best, load_targets(fmt) + (RELOAD_TARGETS if phase == "reload" else []))
        )
        ratio = f"{best['reload_ratio']:.2f}×" if phase == "reload" else ""
        lines.append(
            f"{fmt:<8} {phase:<7} {size:>12,d} {best['seconds']:>8.2f} {best['rows_per_s']:>11,d} "
            f"{best['peak_rss_mib']:>12,.0f} {best['cpu_seconds']:>7.1f} {vs_floor:>8} {ratio:>12}  "
            + "  ".join(checks)
        )
    return lines


def run(
    sizes: list[int],
    formats: list[str],
    *,
    work_dir: Path = focus_data.CACHE_DIR,
    results_file: Path | None = RESULTS_FILE,
    keep: bool = False,
    repeat: int = 1,
    floor: bool = True,
) -> int:
    """Run every (size, format); print the figures; 0 unless a load failed or duplicated rows."""
    work_dir.mkdir(parents=True, exist_ok=True)
    print(
        f"focus_files load benchmark: sizes {', '.join(f'{s:,d}' for s in sizes)}; formats {', '.join(formats)}; "
        f"{repeat} run(s) each; {os.cpu_count()} CPUs; results → {results_file or '(not saved)'}",
        flush=True,
    )
    errors: list[str] = []
    figures: list[dict[str, Any]] = []
    started = time.perf_counter()
    for rows in sizes:
        print(f"--- {rows:,d} rows", flush=True)
        for fmt in formats:
            try:
                got, bad = bench_one(
                    rows, fmt, work_dir=work_dir, results_file=results_file, keep=keep, repeat=repeat, floor=floor
                )
                figures += got
                errors += bad
            except Exception as exc:  # report and go on with the next figure
                errors.append(f"{fmt} {rows:,d}: {exc}")
                print(f"ERROR {fmt} {rows:,d}: {exc}", flush=True)
    print(
        f"--- done in {time.perf_counter() - started:,.0f} s"
        + (f"; best of {repeat} per figure" if repeat > 1 else ""),
        flush=True,
    )
    if figures:
        print("\n".join(summary(figures)), flush=True)
    for error in errors:
        print(f"ERROR {error}", flush=True)
    return 1 if errors else 0


def _sizes(values: list[str]) -> list[int]:
    sizes = []
    for value in values:
        for part in value.split(","):
            part = part.strip().lower().replace("_", "")
            if not part:
                continue
            scale = {"k": 1_000, "m": 1_000_000}.get(part[-1], 1)
            sizes.append(int(float(part[:-1] if scale > 1 else part) * scale))
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", nargs="+", help="sizes, e.g. 1000000 10M or 1M,10M (default 1M 10M)")
    parser.add_argument("--quick", action="store_true", help=f"one small size ({QUICK_SIZE:,d} rows)")
    parser.add_argument("--formats", default=",".join(FORMATS), help="parquet,csv (default both)")
    parser.add_argument(
        "--results", default=str(RESULTS_FILE), help="JSON-lines file to append figures to ('' for none)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the benchmark warehouses in bench/.cache/")
    parser.add_argument(
        "--no-floor",
        dest="floor",
        action="store_false",
        help="skip the CREATE TABLE AS SELECT * floor each load is compared with",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="load and re-load each file N times; the summary shows the fastest (wall time is "
        "noisy when other processes share the CPUs)",
    )
    args = parser.parse_args(argv)
    sizes = _sizes(args.rows) if args.rows else [QUICK_SIZE] if args.quick else list(DEFAULT_SIZES)
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        parser.error(f"unknown format(s) {', '.join(unknown)}")
    return run(
        sizes,
        formats,
        results_file=Path(args.results) if args.results else None,
        keep=args.keep,
        repeat=max(1, args.repeat),
        floor=args.floor,
    )


if __name__ == "__main__":
    sys.exit(main())
