"""Benchmark: shared-GPU chargeback of a Kubernetes fleet's month (``gpu_allocation_hourly``).

Generates (or reuses from ``bench/.cache/allocation/``) a warehouse holding a month (730 hours) of a
1,000-node × 8-GPU fleet: one GPU usage line per node-hour (x_GpuCount 8), 5.84M GPU-hours in
``gpu_metrics_hourly`` and about three pods per GPU-hour in ``gpu_workloads_hourly`` (17.5M rows: most
GPUs run pods one after another with some idle minutes, one in ten is time-sliced by three pods at once,
one node in ten is cut into MIG slices). Then, each in a fresh process so that its peak RSS is its own:

1. **a month's allocation**: every resource-day recomputed (what a settings change or a repair does;
   a restated month's bill does the same for the resource-days it holds); target ≤ 60 s, RSS < 4 GiB;
2. **DuckDB's floors**: one ``GROUP BY`` over the same workload rows (per GPU-hour: workloads, samples),
   into a table, in the same warehouse and memory limit; and writing the allocation's own rows once
   (``CREATE TABLE AS`` of ``gpu_allocation_hourly``: what storing that many rows costs at all);
3. **one new hour**: what a metrics load of one hour for the whole fleet re-allocates (its 1,000
   resource-days), timed inside the load's own recompute.

The figures print side by side; a missed target prints FAIL, the exit status stays 0 (figures, not
tests) unless a run fails or the allocation does not sum to the bill.

    python -m bench.bench_allocation            # 1,000 nodes × 8 GPUs × 730 hours
    python -m bench.bench_allocation --quick    # 50 nodes × 8 GPUs × 48 hours
"""

from __future__ import annotations

import shutil
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.harness import REPO_ROOT, Target, cached_warehouse, fill_warehouse, measure_in_subprocess, report, sized_main

CACHE_DIR = REPO_ROOT / "bench" / ".cache" / "allocation"
RESULTS_FILE = CACHE_DIR / "results.jsonl"
START = datetime(2026, 10, 1, tzinfo=UTC)
GPUS = 8
MEMORY_LIMIT = "3GB"
FULL_TARGETS = [Target("seconds", "<=", 60, "≤ 60 s"), Target("peak_rss_mib", "<", 4096, "RSS < 4 GiB")]


def _home(nodes: int, hours: int) -> Path:
    return CACHE_DIR / f"{nodes}nodes-{hours}h"


def _fill_sql(nodes: int, hours: int) -> list[str]:
    """SQL filling the fleet (node n: i-bench-n, GPU g of node n: GPU-n-g; hour h after START)."""
    hour = f"TIMESTAMPTZ '{START.isoformat()}' + to_hours(h)"
    mig = "n % 10 = 9"  # one node in ten: MIG (3g.40gb + 2 × 2g.20gb per GPU)
    shared = "(n * 8 + g) % 10 = 3 AND NOT (n % 10 = 9)"  # one GPU in ten: three pods time-slice it
    return [
        f"""INSERT INTO cost_line_items ("ResourceId", "x_Team", "ChargePeriodStart", "ChargePeriodEnd", "ChargeCategory",
              "ProviderName", "ServiceName", "x_GpuCount", "x_GpuModel", "EffectiveCost", "BilledCost", "x_Source")
            SELECT printf('i-bench-%05d', n), printf('team-%02d', n % 40), {hour}, {hour} + INTERVAL 1 HOUR, 'Usage',
                   'AWS', 'Amazon Elastic Compute Cloud', {GPUS}, 'H100-SXM', CAST(98.32 AS DECIMAL(38, 15)),
                   CAST(98.32 AS DECIMAL(38, 15)), 'bills'
            FROM range({nodes}) a(n), range({hours}) b(h)""",
        f"""INSERT INTO gpu_metrics_hourly (hour, gpu_uuid, gpu_model, mig_instance, host, resource_id, util_max,
              util_mean, samples, source)
            SELECT {hour}, printf('GPU-%05d-%d', n, g), 'H100-SXM', m.mig, printf('node-%05d', n),
                   printf('i-bench-%05d', n), 40.0, 20.0, 60, 'dcgm'
            FROM range({nodes}) a(n), range({GPUS}) c(g), range({hours}) b(h),
                 (SELECT unnest([NULL, '3g.40gb/1', '2g.20gb/5', '2g.20gb/6']) AS mig) m
            WHERE (m.mig IS NULL) = NOT ({mig})""",
        f"""INSERT INTO gpu_workloads_hourly (hour, gpu_uuid, mig_instance, host, namespace, pod, container, samples,
              occupied_samples, sharing, util_mean, sm_active_mean, mem_used_max_mib, source)
            SELECT {hour}, printf('GPU-%05d-%d', n, g), CASE WHEN {mig} THEN ['3g.40gb/1', '2g.20gb/5', '2g.20gb/6'][p + 1] END,
                   printf('node-%05d', n), printf('ns-%02d', (n + g + p) % 60), printf('pod-%05d-%d-%d-%d', n, g, p, h % 24),
                   'main',
                   CASE WHEN {mig} THEN 60 WHEN {shared} THEN 60 ELSE [20, 20, 15][p + 1] END,
                   CASE WHEN {mig} OR {shared} THEN 60 ELSE 55 END,
                   CASE WHEN {shared} THEN 'timeslice' END, 30.0, 0.1 * (p + 1), 20000.0, 'dcgm'
            FROM range({nodes}) a(n), range({GPUS}) c(g), range({hours}) b(h), range(3) d(p)""",
    ]


def generate(nodes: int, hours: int) -> Path:
    from gpufinops.derived import rollups

    def fill(path: Path) -> None:
        fill_warehouse(path, _fill_sql(nodes, hours), MEMORY_LIMIT, rollups.refresh_cost_daily)

    return cached_warehouse(_home(nodes, hours), fill).parent


def _copy(home: Path, name: str) -> Path:
    work = home / name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    shutil.copy(home / "gpufinops.duckdb", work / "gpufinops.duckdb")
    return work / "gpufinops.duckdb"


def allocate_month(path: str) -> dict[str, Any]:
    """Every resource-day recomputed (runs in the measured child process)."""
    from gpufinops.derived import allocation
    from gpufinops.warehouse import db

    with db.writer(path, memory_limit=MEMORY_LIMIT) as con:
        con.execute("SET enable_progress_bar = false")
        con.execute("BEGIN TRANSACTION")
        rows = allocation.reallocate_all(con, allocation.AllocationSettings())
        con.execute("COMMIT")
    return {"rows": _gpu_hours(path), "allocation_rows": rows}


def _gpu_hours(path: str) -> int:
    import duckdb

    with duckdb.connect(path, read_only=True) as con:
        return con.execute(
            "SELECT count(*) FROM gpu_metrics_hourly WHERE mig_instance IS NULL OR mig_instance = '3g.40gb/1'"
        ).fetchall()[0][0]


def check_sums(path: str) -> int:
    """Resource-hours whose allocation does not sum to their bill (not timed)."""
    import duckdb

    with duckdb.connect(path, read_only=True) as con:
        return con.execute("""SELECT count(*) FROM (SELECT resource_id, hour, sum(cost_usd) AS c
                              FROM gpu_allocation_hourly GROUP BY ALL) WHERE c <> 98.32""").fetchall()[0][0]


def write_floor(path: str) -> dict[str, Any]:
    """DuckDB's floor for writing the allocation's rows: a CREATE TABLE AS of gpu_allocation_hourly."""
    from gpufinops.warehouse import db

    with db.writer(path, memory_limit=MEMORY_LIMIT) as con:
        con.execute("SET enable_progress_bar = false")
        con.execute("SET preserve_insertion_order = false")
        rows = con.execute("CREATE OR REPLACE TABLE _written AS SELECT * FROM gpu_allocation_hourly").fetchall()[0][0]
    return {"rows": int(rows)}


def group_by_floor(path: str) -> dict[str, Any]:
    """DuckDB's floor: one GROUP BY over the same workload rows, into a table."""
    from gpufinops.warehouse import db

    with db.writer(path, memory_limit=MEMORY_LIMIT) as con:
        con.execute("SET enable_progress_bar = false")
        con.execute("""CREATE OR REPLACE TABLE _floor AS SELECT hour, gpu_uuid, mig_instance, count(*) AS workloads,
                       sum(samples) AS samples FROM gpu_workloads_hourly GROUP BY ALL""")
        rows = con.execute("SELECT sum(workloads) FROM _floor").fetchall()[0][0]
    return {"rows": int(rows)}


def allocate_one_hour(path: str, hours: int) -> dict[str, Any]:
    """What a one-hour metrics load of the whole fleet re-allocates: its resource-days."""
    from gpufinops.derived import allocation, attribution
    from gpufinops.warehouse import db

    hour = int(START.timestamp() // 3600) + hours - 1
    slice_value = datetime.fromtimestamp(hour * 3600, UTC).strftime("%Y-%m-%dT%H")
    with db.writer(path, memory_limit=MEMORY_LIMIT) as con:
        con.execute("SET enable_progress_bar = false")
        con.execute("BEGIN TRANSACTION")
        touched = attribution.Touched(
            metric_slices=[
                ("gpu_metrics_hourly", "dcgm", "strftime(\"hour\" AT TIME ZONE 'UTC', '%Y-%m-%dT%H')", [slice_value])
            ]
        )
        rows = allocation.apply(con, touched)
        con.execute("COMMIT")
    return {"rows": rows}


def run(nodes: int, hours: int) -> int:
    home = generate(nodes, hours)
    month = measure_in_subprocess(
        f"allocation, {nodes} nodes x {GPUS} GPUs x {hours} h",
        "bench.bench_allocation:allocate_month",
        {"path": str(_copy(home, "month"))},
    )
    report(month, targets=FULL_TARGETS, results_file=RESULTS_FILE)
    floor = measure_in_subprocess(
        "  floor: one GROUP BY over the workload rows",
        "bench.bench_allocation:group_by_floor",
        {"path": str(_copy(home, "floor"))},
    )
    report(floor, results_file=RESULTS_FILE)
    if floor.get("seconds"):
        print(f"  allocation / floor: {month['seconds'] / floor['seconds']:.1f}x", flush=True)
    written = measure_in_subprocess(
        "  floor: writing the allocation's rows (CREATE TABLE AS)",
        "bench.bench_allocation:write_floor",
        {"path": str(home / "month" / "gpufinops.duckdb")},
    )
    report(written, results_file=RESULTS_FILE)
    hour = measure_in_subprocess(
        f"allocation after a one-hour metrics load ({nodes} resource-days)",
        "bench.bench_allocation:allocate_one_hour",
        {"path": str(home / "month" / "gpufinops.duckdb"), "hours": hours},
    )
    report(hour, results_file=RESULTS_FILE)
    status = 0
    off = check_sums(str(home / "month" / "gpufinops.duckdb"))
    if off:
        print(f"ERROR: {off} resource-hours do not sum to their bill")
        status = 1
    else:
        print(
            f"  every one of the {month['allocation_rows']:,} allocation rows' resource-hours sums to its bill exactly"
        )
    for name in ("month", "floor"):
        shutil.rmtree(home / name, ignore_errors=True)
    return status


def main(argv: list[str] | None = None) -> int:
    title = f"shared-GPU allocation: {{}} nodes x {GPUS} GPUs x {{}} hours"
    return sized_main(argv, __doc__, run, {"nodes": 1000, "hours": 730}, quick=(50, 48), title=title)


if __name__ == "__main__":
    sys.exit(main())
