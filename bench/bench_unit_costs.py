"""Benchmark: unit costs of inference and carbon over a serving fleet's month, beside DuckDB's floor.

Generates (or reuses from ``bench/.cache/unit_costs/``) a warehouse holding ``--days`` days of hourly rows
for ``--pods`` serving pods (default 2,000 pods × 30 days, the serving share of a 10,000-GPU month): one
``serving_metrics_hourly`` row per pod-hour (one pod in ten serves two models: two rows), one
``gpu_allocation_hourly`` row per allocated pod-hour (one GPU each, eight pods per node), one
``carbon_hourly`` row per allocated pod-hour, and the nodes' GPU metrics. One pod in fifty has no allocation
rows, so the whole-resource path (placed on its host's GPU metrics, charged the node's GPU usage line)
runs too. Then, each in a fresh process so that its peak RSS is its own:

1. **DuckDB's floor**: one ``GROUP BY`` joining the same allocation and serving rows per day, namespace and
   model (cost, tokens, requests): what reading and joining those rows costs at all;
2. the stored serving costs (``serving_costs_hourly``, derived/serving_costs.py) filled for the whole
   month, as the first load after an upgrade or a ``[unit_costs]`` change does, and recomputed for one
   day, as a load of that day's data does (on a copy of the warehouse, so the inputs stay unfilled);
3. ``unit_costs()`` per day and model (what ``gpufinops unit-costs`` prints) reading the stored rows, and
   the same computed live (settings that are not the stored ones: what every read cost before the rows
   were stored);
4. ``carbon_summary()`` per team.

Each figure prints with its ratio to the floor; the target is ≤ 2× for the reads. Exit 0 whether or not
targets are met (figures, not tests); 1 when a run fails or unit costs do not sum to the allocated cost.

    python -m bench.bench_unit_costs            # 2,000 pods × 30 days
    python -m bench.bench_unit_costs --quick    # 100 pods × 2 days
"""

from __future__ import annotations

import shutil
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.harness import REPO_ROOT, cached_warehouse, fill_warehouse, measure_in_subprocess, report, sized_main

GENERATOR = "v2"  # v2: written at schema v17 (the stored serving costs' table, left empty)
CACHE_DIR = REPO_ROOT / "bench" / ".cache" / "unit_costs"
RESULTS_FILE = CACHE_DIR / "results.jsonl"
START = datetime(2026, 10, 1, tzinfo=UTC)
MEMORY_LIMIT = "3GB"
TARGET_RATIO = 2.0
HOURLY_USD = "12.29"  # one GPU's hour (allocation rows); a node's usage line is 8 ×


def _home(pods: int, days: int) -> Path:
    return CACHE_DIR / f"{GENERATOR}-{pods}pods-{days}d"


def _fill_sql(pods: int, hours: int) -> list[str]:
    """SQL filling the fleet (pod p: pod-p on node p // 8, GPU-p; hour h after START; p % 50 = 7: unallocated)."""
    hour = f"TIMESTAMPTZ '{START.isoformat()}' + to_hours(h)"
    pod = "printf('pod-%05d', p)"
    ns = "printf('ns-%02d', p % 40)"
    node = "printf('i-bench-%05d', p // 8)"
    unallocated = "p % 50 = 7"
    return [
        f"""INSERT INTO serving_metrics_hourly (hour, server, model, namespace, pod, host, input_tokens, output_tokens,
              requests, prefill_seconds, decode_seconds, counter_resets, samples, source)
            SELECT {hour}, CASE WHEN p % 3 = 0 THEN 'tgi' ELSE 'vllm' END, printf('model-%02d', (p + m) % 20), {ns},
                   {pod}, printf('node-%05d', p // 8), 1000.0 * (1 + (p + h) % 97), 250.0 * (1 + (p * 7 + h) % 89),
                   10.0 * (1 + (p + m + h) % 13), CASE WHEN p % 4 <> 0 THEN 40.0 + (h % 7) END,
                   CASE WHEN p % 4 <> 0 THEN 500.0 + (p % 11) END, 0, 60, 'prometheus'
            FROM range({pods}) a(p), range({hours}) b(h), range(2) c(m) WHERE m = 0 OR p % 10 = 3""",
        f"""INSERT INTO gpu_allocation_hourly (hour, resource_id, provider, host, gpu_uuid, namespace, pod, container,
              team, share, cost_usd, basis, method, source)
            SELECT {hour}, {node}, 'AWS', printf('node-%05d', p // 8), printf('GPU-%05d', p), {ns}, {pod}, 'server',
                   printf('team-%02d', p % 12), 1.0, CAST({HOURLY_USD} AS DECIMAL(38, 15)), 'measured', 'occupancy',
                   'dcgm'
            FROM range({pods}) a(p), range({hours}) b(h) WHERE NOT ({unallocated})""",
        f"""INSERT INTO carbon_hourly (hour, resource_id, provider, region, gpu_uuid, namespace, pod, team, gpu_hours,
              gpu_kwh, node_kwh, pue, kwh, grid_g_co2e_per_kwh, kg_co2e, embodied_kg_co2e, energy_basis, node_basis,
              pue_source, intensity_source, allocation_basis)
            SELECT {hour}, {node}, 'AWS', 'us-east-1', printf('GPU-%05d', p),
                   CASE WHEN {unallocated} THEN NULL ELSE {ns} END, CASE WHEN {unallocated} THEN NULL ELSE {pod} END,
                   printf('team-%02d', p % 12), 1.0, 0.5 + (p % 5) * 0.05, 0.1, 1.2, 0.72 + (p % 5) * 0.06, 380.0,
                   0.27 + (p % 5) * 0.02, 0.01, 'measured', 'measured', 'provider', 'grid', 'allocation'
            FROM range({pods}) a(p), range({hours}) b(h)""",
        f"""INSERT INTO gpu_metrics_hourly (hour, gpu_uuid, gpu_model, host, resource_id, util_max, util_mean, samples,
              source)
            SELECT {hour}, printf('GPU-%05d', p), 'H100-SXM', printf('node-%05d', p // 8), {node}, 90.0, 60.0, 60,
                   'dcgm'
            FROM range({pods}) a(p), range({hours}) b(h)""",
        f"""INSERT INTO cost_line_items ("ResourceId", "x_Team", "ChargePeriodStart", "ChargePeriodEnd",
              "ChargeCategory", "ProviderName", "ServiceName", "x_GpuCount", "x_GpuModel", "EffectiveCost",
              "BilledCost", "x_Source")
            SELECT printf('i-bench-%05d', n), printf('team-%02d', n % 12), {hour}, {hour} + INTERVAL 1 HOUR, 'Usage',
                   'AWS', 'Amazon Elastic Compute Cloud', 8, 'H100-SXM', CAST({HOURLY_USD} AS DECIMAL(38, 15)) * 8,
                   CAST({HOURLY_USD} AS DECIMAL(38, 15)) * 8, 'bills'
            FROM range({(pods + 7) // 8}) a(n), range({hours}) b(h)""",
    ]


def generate(pods: int, days: int) -> Path:
    def fill(path: Path) -> None:
        fill_warehouse(path, _fill_sql(pods, days * 24), MEMORY_LIMIT)

    return cached_warehouse(_home(pods, days), fill).parent


def _connect(path: str) -> Any:
    import duckdb

    con = duckdb.connect(path, read_only=True, config={"memory_limit": MEMORY_LIMIT})
    con.execute("SET enable_progress_bar = false")
    return con


def run_fill(path: str) -> dict[str, Any]:
    """The whole month's stored serving costs, in one transaction (runs in the measured child process)."""
    from gpufinops.derived import serving_costs
    from gpufinops.warehouse import db

    with db.writer(path, memory_limit=MEMORY_LIMIT) as con:
        con.execute("BEGIN TRANSACTION")
        written = serving_costs.recompute_all(con)
        con.execute("COMMIT")
    return {"rows": written}


def run_one_day(path: str, day: int) -> dict[str, Any]:
    """One day's stored serving costs recomputed, as a load of that day does (its carbon step's days)."""
    from gpufinops.derived import serving_costs
    from gpufinops.warehouse import db

    day_n = int(START.timestamp()) // 86_400 + day
    with db.writer(path, memory_limit=MEMORY_LIMIT) as con:
        con.execute("BEGIN TRANSACTION")
        con.execute("CREATE OR REPLACE TEMP TABLE bench_day AS SELECT ?::BIGINT AS day_n", [day_n])
        written = serving_costs.follow(con, "bench_day")
        con.execute("COMMIT")
    return {"rows": written}


def run_unit_costs(path: str, live: bool = False) -> dict[str, Any]:
    """``unit_costs()`` per day and model (runs in the measured child process); ``live``: with settings
    other than the stored ones, so the rows are computed on the read."""
    from gpufinops.derived.unit_costs import UnitCostSettings, unit_costs

    with _connect(path) as con:
        frame = unit_costs(con, settings=UnitCostSettings("weight", 0.3) if live else None)
        alloc = con.execute("SELECT sum(cost_usd) FROM gpu_allocation_hourly").fetchall()[0][0]
    return {"rows": frame.height, "gpu_cost_usd": str(frame["gpu_cost_usd"].sum()), "allocated_usd": str(alloc)}


def run_carbon(path: str) -> dict[str, Any]:
    """``carbon_summary()`` per team (runs in the measured child process)."""
    from gpufinops.warehouse.queries.carbon import carbon_summary

    with _connect(path) as con:
        frame = carbon_summary(con, by="team")
    return {"rows": frame.height}


def floor(path: str) -> dict[str, Any]:
    """DuckDB's floor: one GROUP BY joining the same allocation and serving rows per day, namespace and model."""
    with _connect(path) as con:
        rows = con.execute("""
            SELECT count(*) FROM (
                SELECT date_trunc('day', s.hour) AS day, s.namespace, s.model, sum(a.cost_usd) AS cost_usd,
                       sum(s.input_tokens) AS i, sum(s.output_tokens) AS o, sum(s.requests) AS r
                FROM serving_metrics_hourly s
                JOIN gpu_allocation_hourly a ON a.hour = s.hour AND a.namespace = s.namespace AND a.pod = s.pod
                GROUP BY ALL)""").fetchall()[0][0]
    return {"rows": int(rows)}


def _figure(label: str, size: str, target: str, kwargs: dict[str, Any], base: dict[str, Any], note: str = "") -> dict:
    """Measure ``target`` in a child, print it and its ratio to the floor: against the target, or ``note``."""
    figure = measure_in_subprocess(f"{label}, {size}", f"bench.bench_unit_costs:{target}", kwargs)
    ratio = figure["seconds"] / base["seconds"] if base.get("seconds") else float("inf")
    figure["floor_ratio"] = round(ratio, 2)
    report(figure, results_file=RESULTS_FILE)
    verdict = note or ("PASS" if ratio <= TARGET_RATIO else "FAIL") + f" ≤ {TARGET_RATIO:g}x"
    print(f"  {label} / floor: {ratio:.2f}x  {verdict}", flush=True)
    return figure


def _sums_to_the_allocation(figure: dict[str, Any], pods: int, days: int) -> bool:
    from decimal import Decimal

    unallocated = sum(1 for p in range(pods) if p % 50 == 7)  # each alone on its node: the whole node's line
    expected = Decimal(figure["allocated_usd"]) + Decimal(HOURLY_USD) * 8 * unallocated * days * 24
    if Decimal(figure["gpu_cost_usd"]) != expected:
        print(f"ERROR: unit costs sum to {figure['gpu_cost_usd']}, not {expected}")
        return False
    return True


def run(pods: int, days: int) -> int:
    home = generate(pods, days)
    work = CACHE_DIR / "work" / "gpufinops.duckdb"  # a copy: the measured fill writes to it
    shutil.rmtree(work.parent, ignore_errors=True)
    work.parent.mkdir(parents=True)
    shutil.copyfile(home / "gpufinops.duckdb", work)
    path, size = str(work), f"{pods} pods x {days} days"
    base = measure_in_subprocess(
        "  floor: one GROUP BY joining allocation and serving rows", "bench.bench_unit_costs:floor", {"path": path}
    )
    report(base, results_file=RESULTS_FILE)
    at_load = "(paid when the data lands, not on a read)"
    _figure("stored serving costs, the whole month", size, "run_fill", {"path": path}, base, at_load)
    _figure("stored serving costs, one day", size, "run_one_day", {"path": path, "day": days // 2}, base, at_load)
    status = 0
    for label, live, note in (
        ("unit_costs() per day and model, stored rows", False, ""),
        ("unit_costs() per day and model, computed live", True, "(other settings than the stored: every read before)"),
    ):
        figure = _figure(label, size, "run_unit_costs", {"path": path, "live": live}, base, note)
        status |= 0 if _sums_to_the_allocation(figure, pods, days) else 1
    _figure("carbon_summary() per team", size, "run_carbon", {"path": path}, base)
    return status


def main(argv: list[str] | None = None) -> int:
    title = "unit costs and carbon: {} serving pods x {} days"
    return sized_main(argv, __doc__, run, {"pods": 2000, "days": 30}, quick=(100, 2), title=title)


if __name__ == "__main__":
    sys.exit(main())
