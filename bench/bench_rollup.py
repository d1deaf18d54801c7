"""Benchmark: the hourly GPU rollup of minute samples (``dcgm_exporter``'s sample store → ``gpu_metrics_hourly``).

Generates (or reuses from ``bench/.cache/rollup/``) 30 days of one-minute samples of 1,200 GPUs
(150 hosts × 8) — 51.8M samples — in the day-partitioned sample store, then, each in a fresh process
so that its peak RSS is its own:

1. **full rollup**: a ``dcgm_exporter`` run on an empty warehouse rolls every day of the store up
   to hourly rows (mean / p95 / max utilisation, memory, SM, tensor, power) and loads them;
   target ≤ 60 s with peak RSS < 6 GiB;
2. **incremental hour**: one new hour of samples for the 1,200 GPUs lands in the store (a second
   file in the last day); the next run rolls up the hour its new file spans (read from the day's
   files, pruned by time) and replaces that hour's slice; target ≤ 2 s.

A missed target prints FAIL but the exit status stays 0 (figures, not tests); a run that fails or
yields the wrong number of rows is an error (exit 1).

    python -m bench.bench_rollup            # 1,200 GPUs × 30 days
    python -m bench.bench_rollup --quick    # 120 GPUs × 3 days
"""

from __future__ import annotations

import shutil
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.harness import REPO_ROOT, Target, measure_in_subprocess, report, reuse_or_clear, sized_main, write_sample_day
from gpufinops.ingest.core.registry import Registry
from gpufinops.ingest.core.runner import run_source

# Imported here, not in the measured call: a figure is the rollup, not the interpreter's imports.
from gpufinops.ingest.metrics.dcgm_exporter import DcgmExporter

CACHE_DIR = REPO_ROOT / "bench" / ".cache" / "rollup"
RESULTS_FILE = CACHE_DIR / "results.jsonl"
SOURCE = "bench"
START = datetime(2026, 10, 1, tzinfo=UTC)
GPUS_PER_HOST = 8
FULL_TARGETS = [Target("seconds", "<=", 60, "≤ 60 s"), Target("peak_rss_mib", "<", 6144, "RSS < 6 GiB")]
INCREMENTAL_TARGETS = [Target("seconds", "<=", 2, "≤ 2 s")]


def _home(gpus: int, days: int) -> Path:
    return CACHE_DIR / f"{gpus}gpus-{days}d"


def _samples_sql(gpus: int, start: datetime, minutes: int) -> str:
    """``minutes`` one-minute samples of ``gpus`` GPUs from ``start``, in the sample store's columns."""
    from gpufinops.ingest.metrics.metrics_store import SAMPLE_SCHEMA
    from gpufinops.warehouse.column_types import sql_type

    values = {
        "ts": f"TIMESTAMPTZ '{start.isoformat()}' + to_minutes(m)",
        "gpu_uuid": "printf('GPU-%08d-0000-0000-0000-000000000000', g)",
        "gpu_index": "CAST(g % 8 AS VARCHAR)",
        "name": "'NVIDIA H100 80GB HBM3'",
        "host": f"printf('node-%04d', g // {GPUS_PER_HOST})",
        "util": "CAST(hash(g, m) % 101 AS DOUBLE)",
        "sm_active": "CAST(hash(g, m) % 101 AS DOUBLE) / 110",
        "tensor_active": "CAST(hash(m, g) % 50 AS DOUBLE) / 100",
        "mem_used_mib": "CAST(1000 + hash(g, m // 60) % 70000 AS DOUBLE)",
        "mem_free_mib": "CAST(81559 - 1000 - hash(g, m // 60) % 70000 AS DOUBLE)",
        "power_w": "80 + CAST(hash(g, m) % 101 AS DOUBLE) * 6",
    }
    select = ", ".join(f"CAST({values.get(f.name, 'NULL')} AS {sql_type(f)}) AS {f.name}" for f in SAMPLE_SCHEMA)
    return f"SELECT {select} FROM range({minutes}) s(m), range({gpus}) t(g) ORDER BY m, g"  # time order, as stored


def generate(gpus: int, days: int) -> Path:
    """The store of ``days`` × 1,440 minutes (the last hour left for the incremental run), cached."""
    import duckdb

    home = _home(gpus, days)
    store = home / "samples" / SOURCE
    done = home / ".generated"
    if reuse_or_clear(home):
        return home
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET memory_limit = '2GB'")
    for day in range(days):
        minutes = 1440 - (60 if day == days - 1 else 0)
        write_sample_day(
            con, store, START + timedelta(days=day), _samples_sql(gpus, START + timedelta(days=day), minutes)
        )
        print(f"  generated day {day + 1}/{days}", file=sys.stderr, flush=True)
    con.close()
    done.write_text("ok\n")
    return home


def _registry() -> Registry:
    registry = Registry()
    registry.register(DcgmExporter)
    return registry


def _scrape_file(home: Path, at: datetime) -> Path:
    """A one-sample exposition of GPU 0 at ``at``, a minute the store already holds: a scrape that adds
    nothing new (an empty exposition is refused as a broken target since the validation of issue 16)."""
    path = home / "no-new-scrape.prom"
    path.write_text(
        f'DCGM_FI_DEV_GPU_UTIL{{gpu="0",UUID="GPU-00000000-0000-0000-0000-000000000000",'
        f'Hostname="node-0000"}} 0 {int(at.timestamp() * 1000)}\n'
    )
    return path


def rollup_run(home: str, samples: int, at: str) -> dict[str, Any]:
    """One ``dcgm_exporter`` run over the store (runs in the measured child process)."""
    scrape = _scrape_file(Path(home), datetime.fromisoformat(at))
    result = run_source(
        _registry(), Path(home) / "gpufinops.duckdb", SOURCE, "dcgm_exporter", {"targets": [str(scrape)]}
    )
    if result.status != "succeeded":
        raise RuntimeError(f"rollup run {result.status}: {result.error}")
    return {"rows": samples, "hourly_rows": result.rows}


def add_hour(home: Path, gpus: int, days: int) -> None:
    import duckdb

    last = START + timedelta(days=days) - timedelta(hours=1)
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    folder = home / "samples" / SOURCE / f"day={last.strftime('%Y-%m-%d')}"
    con.execute(
        f"COPY ({_samples_sql(gpus, last, 60)}) TO '{folder / 'new-hour.parquet'}' (FORMAT parquet, COMPRESSION zstd)"
    )
    con.close()


def run(gpus: int, days: int) -> int:
    home = generate(gpus, days)
    for stale in (home / "samples" / SOURCE).glob("day=*/*.parquet"):  # the last run's new hour and its scrapes
        if stale.name != "base.parquet":
            stale.unlink()
    for path in home.glob("gpufinops.duckdb*"):
        path.unlink()
    shutil.rmtree(home / ".duckdb_tmp", ignore_errors=True)
    base_samples = gpus * (days * 1440 - 60)
    full = measure_in_subprocess(
        f"rollup {gpus} GPUs x {days} days",
        "bench.bench_rollup:rollup_run",
        {"home": str(home), "samples": base_samples, "at": START.isoformat()},
    )
    report(full, targets=FULL_TARGETS, results_file=RESULTS_FILE)
    status = 0
    if full.get("hourly_rows") != gpus * (days * 24 - 1):
        print(f"ERROR: full rollup gave {full.get('hourly_rows')} hourly rows, expected {gpus * (days * 24 - 1)}")
        status = 1
    add_hour(home, gpus, days)
    incremental = measure_in_subprocess(
        f"rollup +1 hour, {gpus} GPUs",
        "bench.bench_rollup:rollup_run",
        {"home": str(home), "samples": gpus * 60, "at": (START + timedelta(days=days, hours=-1)).isoformat()},
    )
    report(incremental, targets=INCREMENTAL_TARGETS, results_file=RESULTS_FILE)
    if incremental.get("hourly_rows") != gpus:
        print(f"ERROR: incremental run loaded {incremental.get('hourly_rows')} rows, expected {gpus} (one hour)")
        status = 1
    return status


def main(argv: list[str] | None = None) -> int:
    title = "hourly GPU rollup: {} GPUs x {} days of one-minute samples"
    return sized_main(argv, __doc__, run, {"gpus": 1200, "days": 30}, quick=(120, 3), title=title)


if __name__ == "__main__":
    sys.exit(main())
