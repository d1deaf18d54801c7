"""Benchmark: every alert rule over 10M line items and 10,000 GPUs' hourly metrics (target ≤ 5 s).

The warehouse is the dashboard benchmark's 10M line items (``bench_dashboard.generate``: 90 days of
hourly lines of ~4,600 resources, 12 teams, three providers), with a ``project`` tag on the GPU
lines, a runaway resource on the last day (an anomaly), and the models benchmark's scale of GPU
metrics: 10,000 GPUs of those resources × the last 30 days of hourly rollups (7.2M rows), one in
twenty resources idle throughout and one in twenty idle for its last 10 hours. Cached in
``bench/.cache/alerts/``. Then, in a fresh process, ``models.alerts.evaluate`` runs every rule
(budget with 16 budgets of every scope kind, each with its period-end forecast; anomaly; idle_burn;
stale_data) as ``gpufinops alerts run`` does, on a read-only connection. DuckDB's floor, measured in
the same run: one pass over the columns the rules read (line items by day, team and provider; the
metrics by resource-hour).

    python -m bench.bench_alerts            # 10M line items, 10,000 GPUs
    python -m bench.bench_alerts --quick    # 200k line items, 500 GPUs
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench import bench_dashboard
from bench.harness import REPO_ROOT, Target, cached_warehouse, measure_in_subprocess, report

CACHE_DIR = REPO_ROOT / "bench" / ".cache" / "alerts"
RESULTS_FILE = CACHE_DIR / "results.jsonl"
GENERATOR_VERSION = 1
TARGETS = [Target("seconds", "<=", 5.0, "≤ 5 s")]
METRIC_DAYS = 30
DATA_END = datetime(2026, 8, 1, tzinfo=UTC) + timedelta(days=bench_dashboard.DAYS)  # the dashboard data's end


def generate(line_items: int, gpus: int) -> Path:
    """The dashboard bench's line items plus tags, a spike and ``gpus`` GPUs of metrics; cached."""
    home = CACHE_DIR / f"v{GENERATOR_VERSION}-{line_items}-{gpus}gpus"
    return cached_warehouse(home, lambda path: _fill(path, line_items, gpus))


def _fill(path: Path, line_items: int, gpus: int) -> None:
    from gpufinops.derived import rollups
    from gpufinops.warehouse import db

    bench_dashboard.generate(path, line_items)
    per_hour = max(1, line_items // (bench_dashboard.DAYS * 24))
    counts = bench_dashboard._list([c for _, c, _ in bench_dashboard.GPUS])
    models = bench_dashboard._list([m for m, _, _ in bench_dashboard.GPUS])
    teams = bench_dashboard._list(bench_dashboard.TEAMS)
    first = DATA_END - timedelta(days=METRIC_DAYS)
    last_day = DATA_END - timedelta(days=1)
    with db.writer(path, memory_limit="3GB") as con:
        con.execute("""UPDATE cost_line_items SET "Tags" = json_object('project', ['llm', 'vision', 'search'][
                           (hash("ResourceId") % 3)::INT + 1]) WHERE "x_GpuModel" IS NOT NULL""")
        con.execute(f"""
            INSERT INTO cost_line_items ("ChargePeriodStart", "ChargePeriodEnd", "ProviderName", "x_Team",
                "ServiceName", "ChargeCategory", "PricingCategory", "ResourceId", "x_GpuModel", "x_GpuCount",
                "BilledCost", "EffectiveCost", "ListCost", "BillingCurrency", "SkuId", "ChargeDescription", "x_Source")
            SELECT TIMESTAMPTZ '{last_day.isoformat()}' + to_hours(h), TIMESTAMPTZ '{last_day.isoformat()}' + to_hours(h + 1),
                   'AWS', 'genai', 'Compute', 'Usage', 'Standard', 'res-runaway', 'H100', 8, 900, 900, 900, 'USD',
                   'sku-runaway', 'runaway training job', 'bench'
            FROM range(24) t(h)""")
        rollups.refresh_cost_daily(con, "bench")
        con.execute("DELETE FROM gpu_metrics_hourly")
        con.execute(f"""
            INSERT INTO gpu_metrics_hourly (hour, gpu_uuid, gpu_model, host, resource_id, team, util_mean, util_p95,
                util_max, mem_used_max_mib, mem_total_mib, samples, source)
            WITH res AS (SELECT r, (hash(r) % 7)::INT + 1 AS g, r % 12 + 1 AS t FROM range({per_hour}) x(r) WHERE r % 5 < 3),
            sized AS (SELECT *, {counts}[g] AS n, sum({counts}[g]) OVER (ORDER BY r) AS upto FROM res),
            chosen AS (SELECT * FROM sized WHERE upto <= {gpus}),
            gpu AS (SELECT chosen.*, i FROM chosen, range(8) s(i) WHERE i < n)
            SELECT TIMESTAMPTZ '{first.isoformat()}' + to_hours(h), 'GPU-' || r || '-' || i, {models}[g], 'host-' || r,
                   'res-' || r, {teams}[t], u * 0.8, u, least(100, u + 2), 20000.0, 81920.0, 60, 'metrics'
            FROM (SELECT gpu.*, h, CASE WHEN r % 20 = 7 THEN (hash(r, i, h) % 3)::DOUBLE
                                        WHEN r % 20 = 11 AND h >= {METRIC_DAYS * 24 - 10} THEN 1.0
                                        ELSE 20 + (hash(r, i, h) % 75)::DOUBLE END AS u
                  FROM gpu, range({METRIC_DAYS * 24}) t(h))""")
        con.execute("""INSERT INTO ingest_runs (run_id, source, source_type, started_at, finished_at, status, rows,
                       watermark, error, freshness_kind, expected_lag_hours) VALUES ('bench-cost', 'bench',
                       'focus_files', now(), now(), 'succeeded', 0, NULL, NULL, 'cost', 48.0), ('bench-metrics',
                       'metrics', 'dcgm_exporter', now(), now(), 'succeeded', 0, NULL, NULL, 'metrics', 1.0)""")
        con.execute("CHECKPOINT")


def budgets() -> tuple:
    from decimal import Decimal

    from gpufinops.models.budgets import Budget, BudgetScope

    out = [
        Budget("fleet", Decimal(3_000_000), forecast=True),
        Budget(
            "aws-quarter", Decimal(5_000_000), period="quarter", scope=BudgetScope(providers=("aws",)), forecast=True
        ),
        Budget("h100", Decimal(500_000), scope=BudgetScope(gpu_models=("H100",)), forecast=True),
        Budget("llm", Decimal(400_000), scope=BudgetScope(tags=(("project", ("llm",)),)), forecast=True),
    ]
    out += [
        Budget(f"team:{t}", Decimal(150_000), scope=BudgetScope(teams=(t,)), forecast=True)
        for t in bench_dashboard.TEAMS
    ]
    return tuple(out)


def evaluate_all(db: str) -> dict[str, Any]:
    """Every rule, as `gpufinops alerts run` evaluates them (runs in the measured child process)."""
    import os

    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from gpufinops.models.alerts import AlertSettings, evaluate
    from gpufinops.warehouse import db as warehouse_db

    settings = AlertSettings(budgets=budgets())
    with warehouse_db.reader(db, memory_limit="2GB") as con:
        outcomes = evaluate(con, settings, DATA_END + timedelta(minutes=30))
    return {
        "rows": 0,
        "seconds_by_rule": {o.rule: o.seconds for o in outcomes},
        "alerts_by_rule": {o.rule: len(o.alerts) for o in outcomes},
        "notes": [n for o in outcomes for n in o.notes],
    }


def floor(db: str) -> dict[str, Any]:
    """DuckDB's own time for one pass over what the rules read (no model, no Python per row)."""
    from gpufinops.warehouse import db as warehouse_db

    with warehouse_db.reader(db, memory_limit="2GB") as con:
        started = time.perf_counter()
        con.execute(
            'SELECT count(*) FROM (SELECT epoch_us("ChargePeriodStart") // 86400000000, "x_Team", '
            '"ProviderName", sum("EffectiveCost") FROM cost_line_items GROUP BY ALL)'
        ).fetchall()
        con.execute(
            "SELECT count(*) FROM (SELECT resource_id, hour, max(util_max) FROM gpu_metrics_hourly GROUP BY ALL)"
        ).fetchall()
        seconds = time.perf_counter() - started
    return {"rows": 0, "floor_seconds": round(seconds, 3)}


def run(line_items: int, gpus: int) -> int:
    started = time.perf_counter()
    path = generate(line_items, gpus)
    print(f"  warehouse ready in {time.perf_counter() - started:.0f} s: {path}", flush=True)
    from gpufinops.warehouse import db

    with db.writer(path, memory_limit="3GB"):
        pass  # a cached warehouse generated before the latest migrations is upgraded
    with db.reader(path) as con:
        lines = con.execute("SELECT count(*) FROM cost_line_items").fetchall()[0][0]
        metric_gpus, metric_rows = con.execute(
            "SELECT count(DISTINCT gpu_uuid), count(*) FROM gpu_metrics_hourly"
        ).fetchall()[0]
    floor_figure = measure_in_subprocess("DuckDB floor: one pass", "bench.bench_alerts:floor", {"db": str(path)})
    figure = measure_in_subprocess(
        f"alert rules, {lines:,} lines, {metric_gpus:,} GPUs", "bench.bench_alerts:evaluate_all", {"db": str(path)}
    )
    figure.update(
        rows=lines,
        metric_rows=metric_rows,
        floor_seconds=floor_figure["floor_seconds"],
        ratio_to_floor=round(figure["seconds"] / floor_figure["floor_seconds"], 2),
    )
    report(figure, targets=TARGETS, results_file=RESULTS_FILE)
    print(
        f"  per rule (s): {figure['seconds_by_rule']}; alerts: {figure['alerts_by_rule']}; "
        f"DuckDB floor {floor_figure['floor_seconds']:.2f} s (× {figure['ratio_to_floor']})"
    )
    for note in figure["notes"]:
        print(f"  note: {note}")
    if not figure["alerts_by_rule"].get("idle_burn") or not figure["alerts_by_rule"].get("budget"):
        print("ERROR: the rules found nothing in a warehouse with planted idle GPUs and crossed budgets")
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="200k line items, 500 GPUs (a smoke run)")
    args = parser.parse_args(argv)
    line_items, gpus = (200_000, 500) if args.quick else (10_000_000, 10_000)
    print(f"alert rules: {line_items:,} line items, {gpus:,} GPUs x {METRIC_DAYS} days of hourly metrics", flush=True)
    return run(line_items, gpus)


if __name__ == "__main__":
    sys.exit(main())
