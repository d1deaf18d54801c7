"""Benchmark: the hourly path ``serve`` runs all day, one new hour of a shared Kubernetes GPU fleet.

Generates (or reuses from ``bench/.cache/hour/``) a warehouse holding 47 hours of a fleet of 8-GPU
nodes (default 10,000 GPUs): one GPU usage line per node-hour (the bill of the new hour included, so
that the allocation has the hour to divide), the hourly GPU rows and about three pods per GPU-hour
(one GPU in ten time-sliced by three pods at once), allocated; and the sample store of the
``dcgm_exporter`` source, whose state lists its files. Then the new hour (hour 23 of the second day)
lands in the store as one file of one-minute samples (600k samples for 10,000 GPUs, pod-labelled as
dcgm-exporter labels them) and, each in a fresh process so that its peak RSS is its own:

1. **the load**: ``dcgm_exporter`` scrapes its target and rolls the new hour up into
   ``gpu_metrics_hourly`` and ``gpu_workloads_hourly``, attribution resolves the GPU-hours and the
   allocation recomputes what they change, in one transaction (the runner's own path); each part is
   timed inside the load;
2. **the alerts**: every alert rule over the warehouse, as ``gpufinops alerts run`` evaluates them.

The parts print one by one with the total; the target is ≤ 30 s for 10,000 GPUs. A missed target
prints FAIL; the exit status stays 0 (figures, not tests) unless a run fails or the new hour's
allocation does not sum to its bill.

    python -m bench.bench_hour               # 10,000 GPUs
    python -m bench.bench_hour --gpus 800    # any fleet size (8-GPU nodes)
    python -m bench.bench_hour --quick       # 400 GPUs
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.harness import REPO_ROOT, Target, measure_in_subprocess, report, reuse_or_clear

CACHE_DIR = REPO_ROOT / "bench" / ".cache" / "hour"
RESULTS_FILE = CACHE_DIR / "results.jsonl"
START = datetime(2026, 10, 1, tzinfo=UTC)
HISTORY_HOURS = 47  # the first day and 23 hours of the second; the new hour is the second day's last
SOURCE, GPUS_PER_NODE, PODS = "gpus", 8, 3
NODE_COST = "98.32"
MEMORY_LIMIT = "3GB"
TARGETS = [Target("seconds", "<=", 30, "≤ 30 s"), Target("peak_rss_mib", "<", 4096, "RSS < 4 GiB")]
SHARED = "(n * 8 + g) % 10 = 3"  # one GPU in ten: three pods time-slice it


def _home(gpus: int) -> Path:
    return CACHE_DIR / f"{gpus}gpus"


def _history_sql(nodes: int) -> list[str]:
    """The warehouse's 47 hours (node n: i-bench-n / node-n; GPU g of node n: GPU-n-g), and the new hour's bill."""
    hour = f"TIMESTAMPTZ '{START.isoformat()}' + to_hours(h)"
    return [
        f"""INSERT INTO cost_line_items ("ResourceId", "x_Team", "ChargePeriodStart", "ChargePeriodEnd", "ChargeCategory",
              "ProviderName", "ServiceName", "x_GpuCount", "x_GpuModel", "EffectiveCost", "BilledCost", "x_Source")
            SELECT printf('i-bench-%05d', n), printf('team-%02d', n % 40), {hour}, {hour} + INTERVAL 1 HOUR, 'Usage',
                   'AWS', 'Amazon Elastic Compute Cloud', {GPUS_PER_NODE}, 'H100-SXM', CAST({NODE_COST} AS DECIMAL(38, 15)),
                   CAST({NODE_COST} AS DECIMAL(38, 15)), 'bills'
            FROM range({nodes}) a(n), range({HISTORY_HOURS + 1}) b(h)""",
        f"""INSERT INTO gpu_metrics_hourly (hour, gpu_uuid, gpu_model, host, resource_hint, resource_id, team, util_max,
              util_mean, samples, source)
            SELECT {hour}, printf('GPU-%05d-%d', n, g), 'NVIDIA H100 80GB HBM3', printf('node-%05d', n),
                   printf('i-bench-%05d', n), printf('i-bench-%05d', n), printf('team-%02d', n % 40), 40.0, 20.0, 60,
                   '{SOURCE}'
            FROM range({nodes}) a(n), range({GPUS_PER_NODE}) c(g), range({HISTORY_HOURS}) b(h)""",
        f"""INSERT INTO gpu_workloads_hourly (hour, gpu_uuid, host, namespace, pod, container, samples, occupied_samples,
              sharing, util_mean, sm_active_mean, mem_used_max_mib, source)
            SELECT {hour}, printf('GPU-%05d-%d', n, g), printf('node-%05d', n), printf('ns-%02d', (n + g + p) % 60),
                   printf('pod-%05d-%d-%d', n, g, p), 'main', CASE WHEN {SHARED} THEN 60 ELSE 20 END, 60,
                   CASE WHEN {SHARED} THEN 'timeslice' END, 30.0, 0.1 * (p + 1), 20000.0, '{SOURCE}'
            FROM range({nodes}) a(n), range({GPUS_PER_NODE}) c(g), range({HISTORY_HOURS}) b(h), range({PODS}) d(p)""",
    ]


def _samples_sql(nodes: int, hour: int) -> str:
    """One-minute samples of hour ``hour``: each GPU's three pods one after another (20 minutes each),
    a time-sliced GPU's three pods at every minute (one series per pod, with the ``vgpu`` label)."""
    from gpufinops.ingest.metrics.metrics_store import SAMPLE_SCHEMA
    from gpufinops.warehouse.column_types import sql_type

    values = {
        "ts": f"TIMESTAMPTZ '{START.isoformat()}' + to_hours({hour}) + to_minutes(m)",
        "gpu_uuid": "printf('GPU-%05d-%d', n, g)",
        "gpu_index": "CAST(g AS VARCHAR)",
        "name": "'NVIDIA H100 80GB HBM3'",
        "host": "printf('node-%05d', n)",
        "resource_hint": "printf('i-bench-%05d', n)",
        "namespace": "printf('ns-%02d', (n + g + p) % 60)",
        "pod": "printf('pod-%05d-%d-%d', n, g, p)",
        "container": "'main'",
        "util": "CAST(30 + hash(n, g, m) % 61 AS DOUBLE)",
        "sm_active": "0.1 * (p + 1)",
        "mem_used_mib": "20000.0",
        "mem_total_mib": "81559.0",
        "power_w": "400.0",
        "vgpu": f"CASE WHEN {SHARED} THEN CAST(p AS VARCHAR) END",
    }
    select = ", ".join(f"CAST({values.get(f.name, 'NULL')} AS {sql_type(f)}) AS {f.name}" for f in SAMPLE_SCHEMA)
    return (
        f"SELECT {select} FROM range(60) s(m), range({nodes}) a(n), range({GPUS_PER_NODE}) c(g), range({PODS}) d(p) "
        f"WHERE {SHARED} OR p = m // 20 ORDER BY m, n, g, p"
    )


def _day(hour: int) -> str:
    return (START + timedelta(hours=hour)).strftime("%Y-%m-%d")


def generate(gpus: int) -> Path:
    """The cached warehouse, allocated, with its sample store and the source's state (not timed)."""
    from gpufinops.derived import allocation, rollups
    from gpufinops.warehouse import db

    home = _home(gpus)
    if reuse_or_clear(home):
        return home
    nodes = gpus // GPUS_PER_NODE
    path = home / "base" / "gpufinops.duckdb"
    store = path.parent / "samples" / SOURCE
    with db.writer(path, memory_limit=MEMORY_LIMIT) as con:
        con.execute("SET enable_progress_bar = false")
        for statement in _history_sql(nodes):
            con.execute(statement)
        rollups.refresh_cost_daily(con)
        con.execute("BEGIN TRANSACTION")
        allocation.reallocate_all(con, allocation.AllocationSettings())
        con.execute("COMMIT")
        # the store as the earlier runs left it: the samples of the second day's last stored hour (the
        # rollup of a new hour reads its day's files, pruned to the hour by their statistics)
        day_dir = store / f"day={_day(HISTORY_HOURS - 1)}"
        day_dir.mkdir(parents=True)
        con.execute(
            f"COPY ({_samples_sql(nodes, HISTORY_HOURS - 1)}) TO '{day_dir / 'earlier.parquet'}' "
            "(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 1000000)"
        )
        new_dir = home / "new_hour"
        new_dir.mkdir()
        con.execute(
            f"COPY ({_samples_sql(nodes, HISTORY_HOURS)}) TO '{new_dir / 'new.parquet'}' "
            "(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 1000000)"
        )
        files = {_day(HISTORY_HOURS - 1): [["earlier.parquet", (day_dir / "earlier.parquet").stat().st_size]]}
        state = {"days": files, "stamped_bodies": {}, "watermark": _day(HISTORY_HOURS - 1)}
        con.execute("INSERT INTO ingest_state VALUES (?, ?, now())", [SOURCE, json.dumps(state, sort_keys=True)])
        con.execute("CHECKPOINT")
    ts = int((START + timedelta(hours=HISTORY_HOURS)).timestamp() * 1000)
    (home / "scrape.prom").write_text(  # the target: one sample the hour's file already holds (counted once)
        'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-00000-0",modelName="NVIDIA H100 80GB HBM3",Hostname="node-00000",'
        f'instance_id="i-bench-00000",namespace="ns-00",pod="pod-00000-0-0",container="main"}} 400 {ts}\n'
    )
    (home / ".generated").write_text("ok\n")
    return home


def _copy(home: Path) -> Path:
    work = home / "run"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(home / "base", work)
    day_dir = work / "samples" / SOURCE / f"day={_day(HISTORY_HOURS)}"
    day_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(home / "new_hour" / "new.parquet", day_dir / "scrapes.parquet")  # the hour's scrapes, compacted
    return work / "gpufinops.duckdb"


def load_hour(path: str, scrape: str) -> dict[str, Any]:
    """The dcgm_exporter run of the new hour, its attribution and allocation timed inside the load."""
    from gpufinops.ingest.core import runner
    from gpufinops.ingest.core.registry import default_registry

    timings: dict[str, float] = {}

    def timed(name: str, fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                timings[name] = timings.get(name, 0.0) + time.perf_counter() - started

        return wrapper

    attribution_apply, allocation_apply = runner.attribution.apply, runner.allocation.apply
    runner.attribution.apply = timed("attribution", attribution_apply)
    runner.allocation.apply = timed("allocation", allocation_apply)
    try:
        result = runner.run_source(
            default_registry(), path, SOURCE, "dcgm_exporter", {"targets": [scrape]}, memory_limit=MEMORY_LIMIT
        )
    finally:
        runner.attribution.apply, runner.allocation.apply = attribution_apply, allocation_apply
    if result.status != "succeeded":
        raise RuntimeError(f"dcgm_exporter ended {result.status}: {result.error}")
    return {"rows": result.rows, **{f"{k}_seconds": round(v, 3) for k, v in timings.items()}}


def alerts(path: str) -> dict[str, Any]:
    """Every alert rule, as `gpufinops alerts run` evaluates them after the load."""
    from decimal import Decimal

    from gpufinops.models.alerts import AlertSettings, evaluate
    from gpufinops.models.budgets import Budget
    from gpufinops.warehouse import db

    settings = AlertSettings(budgets=(Budget("fleet", Decimal(1_000_000), forecast=True),))
    with db.reader(path, memory_limit="2GB") as con:
        outcomes = evaluate(con, settings, START + timedelta(hours=HISTORY_HOURS + 1, minutes=5))
    return {"rows": sum(len(o.alerts) for o in outcomes), "seconds_by_rule": {o.rule: o.seconds for o in outcomes}}


def check(path: str, nodes: int) -> str | None:
    """Why the new hour is wrong (its allocation does not sum to its bill, or is missing), else None."""
    import duckdb

    hour = START + timedelta(hours=HISTORY_HOURS)
    with duckdb.connect(path, read_only=True) as con:
        sums = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE c <> CAST(? AS DECIMAL(38, 15))) FROM (SELECT resource_id, "
            "sum(cost_usd) AS c FROM gpu_allocation_hourly WHERE hour = ? GROUP BY 1)",
            [NODE_COST, hour],
        ).fetchall()[0]
        workloads = con.execute("SELECT count(*) FROM gpu_workloads_hourly WHERE hour = ?", [hour]).fetchall()[0][0]
    if sums[0] != nodes:
        return f"the new hour allocated {sums[0]} of {nodes} nodes"
    if sums[1]:
        return f"{sums[1]} resource-hours of the new hour do not sum to their bill"
    if not workloads:
        return "the rollup wrote no workload rows for the new hour"
    return None


def run(gpus: int) -> int:
    nodes = gpus // GPUS_PER_NODE
    started = time.perf_counter()
    home = generate(gpus)
    print(f"  warehouse ready in {time.perf_counter() - started:.0f} s: {home / 'base'}", flush=True)
    path = _copy(home)
    load = measure_in_subprocess(
        f"one new hour, {nodes * GPUS_PER_NODE:,} GPUs: load",
        "bench.bench_hour:load_hour",
        {"path": str(path), "scrape": str(home / "scrape.prom")},
    )
    report(load, results_file=RESULTS_FILE)
    attribution_s, allocation_s = load.get("attribution_seconds", 0.0), load.get("allocation_seconds", 0.0)
    rollup_s = load["seconds"] - attribution_s - allocation_s
    rules = measure_in_subprocess("  alert rules", "bench.bench_hour:alerts", {"path": str(path)})
    report(rules, results_file=RESULTS_FILE)
    total = {
        "label": f"the hour, {nodes * GPUS_PER_NODE:,} GPUs",
        "rows": load["rows"],
        "seconds": round(load["seconds"] + rules["seconds"], 3),
        "peak_rss_mib": max(load["peak_rss_mib"], rules["peak_rss_mib"]),
        "cpu_seconds": round(load["cpu_seconds"] + rules["cpu_seconds"], 2),
        "loadavg_1m": load.get("loadavg_1m"),
        "scrape_rollup_seconds": round(rollup_s, 3),
        "attribution_seconds": attribution_s,
        "allocation_seconds": allocation_s,
        "alerts_seconds": rules["seconds"],
    }
    print(
        f"  scrape + rollup (and the load's writes) {rollup_s:.2f} s, attribution {attribution_s:.2f} s, "
        f"allocation {allocation_s:.2f} s, alerts {rules['seconds']:.2f} s {rules.get('seconds_by_rule', {})}",
        flush=True,
    )
    report(total, targets=TARGETS if gpus >= 10_000 else (), results_file=RESULTS_FILE)
    problem = check(str(path), nodes)
    shutil.rmtree(home / "run", ignore_errors=True)
    if problem:
        print(f"ERROR: {problem}")
        return 1
    print(f"  the new hour's allocation sums to every node's bill exactly ({nodes:,} nodes)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="400 GPUs (a smoke run)")
    parser.add_argument("--gpus", type=int, default=10_000, help="fleet size, 8-GPU nodes (default 10,000)")
    args = parser.parse_args(argv)
    gpus = 400 if args.quick else args.gpus
    if gpus < GPUS_PER_NODE:
        parser.error(f"--gpus: at least {GPUS_PER_NODE} (one node)")
    print(f"the hourly path: one new hour for {gpus // GPUS_PER_NODE * GPUS_PER_NODE:,} GPUs", flush=True)
    return run(gpus // GPUS_PER_NODE * GPUS_PER_NODE)


if __name__ == "__main__":
    sys.exit(main())
