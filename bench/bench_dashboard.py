"""Benchmark: each dashboard page's queries, p95 over 50 loads, on a warehouse of 10M line items.

The warehouse is generated directly in DuckDB (cached in ``bench/.cache/dashboard/``): 90 days of
hourly line items of ~4,600 resources (12 teams, AWS / Google Cloud / onprem, 60 % of resources GPU
instances of 7 models, the rest storage and network), one GPU's hourly metrics for 600 of the GPU
resources, 2,000 recommendations of every kind, spot prices, and an ingest ledger.

A page load is what the page does on each render: open a read-only connection, run the page's
queries (default 30-day window), close. Measured for a finance viewer (every team) and a lead (one
team), cold (every query runs), and as a render with the dashboard's per-data-version cache warm
(the Overview, Team and Fleet pages cache their heavy queries until the next ingest, model run
or decision). Target: each page's p95 ≤ 300 ms. The forecast model's fit (``models.forecast``), which the
Overview and Team pages cache per data version, is timed on its own (5 loads). Figures, not tests:
exit 0 whether or not the target is met. The 1-minute load average is printed: on a shared machine
wall time grows with it.

    python -m bench.bench_dashboard              # 10M line items, 50 loads per page
    python -m bench.bench_dashboard --quick      # 200k line items, 10 loads
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from bench.harness import REPO_ROOT
from gpufinops.derived import rollups
from gpufinops.warehouse import db, queries

CACHE_DIR = REPO_ROOT / "bench" / ".cache" / "dashboard"
RESULTS_FILE = CACHE_DIR / "results.jsonl"
GENERATOR_VERSION = 1
TEAMS = [
    "vision",
    "nlp",
    "speech",
    "recsys",
    "research",
    "platform",
    "ads",
    "search",
    "robotics",
    "genai",
    "infra",
    "data",
]
PROVIDERS = ["AWS", "Google Cloud", "onprem"]
GPUS = [
    ("A100-40GB", 8, 32.77),
    ("A100-80GB", 8, 40.97),
    ("H100", 8, 98.32),
    ("L4", 1, 0.98),
    ("A10G", 1, 1.21),
    ("T4", 1, 0.53),
    ("L40S", 4, 7.3),
]
DAYS = 90
TARGET_MS = 300.0
WINDOW_DAYS = 30  # the pages' default history window
FORECAST_LOADS = 5
KINDS = ["idle_gpu", "gpu_count", "gpu_type", "quantization", "spot_mix", "commitment", "onprem_vs_cloud"]


def _list(values: list) -> str:
    return "[" + ", ".join(f"'{v}'" if isinstance(v, str) else str(v) for v in values) + "]"


def generate(path: Path, line_items: int) -> None:
    """Write the benchmark warehouse (schema through db.writer; rows straight from SQL)."""
    per_hour = max(1, line_items // (DAYS * 24))
    with db.writer(path, memory_limit="3GB") as con:
        con.execute("SET enable_progress_bar = false").fetchall()
        con.execute(f"""
            INSERT INTO cost_line_items ("ChargePeriodStart", "ChargePeriodEnd", "BillingPeriodStart",
                "BillingPeriodEnd", "ProviderName", "x_Team", "ServiceName", "ServiceCategory", "ChargeCategory",
                "ChargeClass", "PricingCategory", "ResourceId", "RegionId", "x_InstanceType", "x_GpuModel",
                "x_GpuCount", "BilledCost", "EffectiveCost", "ListCost", "BillingCurrency", "SkuId",
                "ChargeDescription", "x_Source")
            WITH lines AS (
                SELECT i // {per_hour} AS h, i % {per_hour} AS r,
                       TIMESTAMPTZ '2026-08-01 00:00:00+00' + to_hours(i // {per_hour}) AS ts FROM range({line_items}) t(i)),
            res AS (SELECT *, r % 5 < 3 AS gpu, (hash(r) % 7)::INT + 1 AS g, r % 12 + 1 AS t, (hash(r, 1) % 3)::INT + 1 AS p
                    FROM lines)
            SELECT ts, ts + INTERVAL 1 HOUR, date_trunc('month', ts), date_trunc('month', ts) + INTERVAL 1 MONTH,
                   {_list(PROVIDERS)}[p], {_list(TEAMS)}[t],
                   CASE WHEN gpu THEN 'Compute' WHEN r % 5 = 3 THEN 'Storage' ELSE 'Networking' END, 'Compute',
                   'Usage', NULL, CASE WHEN hash(r, 2) % 10 < 2 THEN 'Dynamic' ELSE 'Standard' END,
                   'res-' || r, 'region-' || (r % 5), CASE WHEN gpu THEN 'gpu-type-' || g ELSE NULL END,
                   CASE WHEN gpu THEN {_list([m for m, _, _ in GPUS])}[g] ELSE NULL END,
                   CASE WHEN gpu THEN {_list([c for _, c, _ in GPUS])}[g] ELSE NULL END,
                   (CASE WHEN gpu THEN {_list([pr for _, _, pr in GPUS])}[g] ELSE 0.05 END
                       * (0.9 + (hash(r, h) % 200) / 1000.0))::DECIMAL(38, 15) AS cost,
                   cost, cost, 'USD', 'sku-' || (r % 97), 'bench line', 'bench'
            FROM res""").fetchall()
        gpu_resources = f"(SELECT r FROM range({per_hour}) t(r) WHERE r % 5 < 3 LIMIT 600)"
        con.execute(f"""
            INSERT INTO gpu_metrics_hourly (hour, gpu_uuid, gpu_model, host, resource_id, team, util_mean, util_p95,
                util_max, mem_used_max_mib, mem_total_mib, samples, source)
            SELECT TIMESTAMPTZ '2026-08-01 00:00:00+00' + to_hours(h), 'GPU-' || r, {_list([m for m, _, _ in GPUS])}[
                   (hash(r) % 7)::INT + 1], 'host-' || r, 'res-' || r, {_list(TEAMS)}[r % 12 + 1],
                   (hash(r, h) % 100)::DOUBLE, least(100, (hash(r, h) % 100) + 5)::DOUBLE,
                   least(100, (hash(r, h) % 100) + 10)::DOUBLE, 20000.0, 81920.0, 60, 'bench'
            FROM {gpu_resources} g, range({DAYS * 24}) t(h)""").fetchall()
        con.execute(f"""
            INSERT INTO recommendations (id, kind, team, provider, resource_id, current, proposed,
                monthly_savings_usd, confidence, risk, evidence, created_at, status)
            SELECT 'rec-' || i, {_list(KINDS)}[i % 7 + 1], {_list(TEAMS)}[i % 12 + 1], 'aws', 'res-' || (i * 5),
                   '{{"gpu_model": "A100-80GB", "gpu_count": 8}}', '{{"gpu_model": "L4", "gpu_count": 8}}',
                   (hash(i) % 100000 / 10.0)::DECIMAL(18, 2), 0.8, 'low', '{{"pattern": "bench"}}', now(),
                   CASE WHEN i % 10 = 0 THEN 'accepted' WHEN i % 17 = 0 THEN 'applied' ELSE 'open' END
            FROM range(2000) t(i)""").fetchall()
        con.execute(f"""
            INSERT INTO spot_prices SELECT 'aws', 'region-' || (k % 5), 'zone-' || (k % 5), 'gpu-type-' || (k // 5 + 1),
                   'Linux/UNIX', TIMESTAMPTZ '2026-08-01 00:00:00+00' + to_hours(h * 6),
                   (1 + (hash(k, h) % 300) / 100.0)::DECIMAL(18, 8)
            FROM range(35) a(k), range({DAYS * 4}) b(h)""").fetchall()
        con.execute("""
            INSERT INTO ingest_runs (run_id, source, source_type, started_at, finished_at, status, rows, watermark,
                   error, rows_rejected, freshness_kind, expected_lag_hours)
            SELECT 'run-' || i, 'src-' || (i % 6), 'focus_files', now() - to_hours(i), now() - to_hours(i),
                   'succeeded', 1000, NULL, NULL, 0, 'cost', 48.0 FROM range(500) t(i)""").fetchall()
        rollups.refresh_cost_daily(con)  # what the ingest runner keeps in step with every cost load
        con.execute("CHECKPOINT").fetchall()


def _spend_queries(con, team: list[str] | None, days: int = WINDOW_DAYS):
    """The queries of ``dashboard.spend.load`` (Overview and Team), without the forecast model."""
    queries.dashboard_data_version(con)
    as_of = queries.latest_charge_day(con, team=team)
    if as_of is None:
        raise RuntimeError("the benchmark warehouse has no cost data in scope")
    queries.spend_daily(con, team=team, start=as_of - timedelta(days=days - 1), end=as_of + timedelta(days=1))
    queries.savings_by_status(con, team=team)
    return as_of


def page_loads(team: list[str] | None) -> dict[str, Callable]:
    """Each page's queries, as the page runs them on a render (see dashboard/pages/*.py)."""

    def overview(con):
        _spend_queries(con, team)

    def team_page(con):
        queries.cost_teams(con, team=team)
        one = [(team or ["vision"])[0]]
        as_of = _spend_queries(con, one)
        queries.fleet_utilisation(con, team=one, start=as_of - timedelta(days=WINDOW_DAYS - 1))
        queries.recommendations(con, team=one)

    def fleet(con):
        as_of = queries.latest_charge_day(con, team=team)
        start = as_of - timedelta(days=WINDOW_DAYS - 1)
        queries.fleet_utilisation(con, team=team, start=start)
        queries.idle_gpu_cost(con, team=team, start=start)
        if team is None:
            queries.unattributed_gpu_hours(con)
            queries.gpu_hours_attribution(con, start=start)

    def recommendations(con):
        recs = queries.recommendations(con, team=team)
        top = recs.row(0, named=True)
        queries.dashboard_recommendation(con, top["id"], team=team)
        queries.resource_utilisation(con, top["resource_id"])
        queries.gpu_memory_gib(con, ["A100-80GB", "L4"])
        queries.spot_price_history(con, "aws", "gpu-type-1")
        queries.decisions_log(con, team=team, recommendation_id=top["id"])

    def spot(con):
        queries.spot_series(con)
        queries.spot_interruption(con)
        queries.spot_price_history(con, "aws", "gpu-type-1")

    def health(con):
        queries.ingest_status(con)
        queries.job_status(con)

    return {
        "overview": overview,
        "team": team_page,
        "fleet": fleet,
        "recommendations": recommendations,
        "spot": spot,
        "health": health,
    }


def cached_page_loads(team: list[str] | None) -> dict[str, Callable]:
    """The pages whose heavy queries the dashboard caches per data version, loaded as the page does
    (``spend.load_current``, ``common.cached_query``): the first load fills the cache (and is not
    counted), the next ones are what a viewer waits for between two ingests."""
    from gpufinops.dashboard import spend
    from gpufinops.dashboard.common import cached_query, window_start

    def overview(con):
        spend.load_current(con, team, WINDOW_DAYS)

    def team_page(con):
        cached_query(con, "cost_teams", team=team)
        one = [(team or ["vision"])[0]]
        data = spend.load_current(con, one, WINDOW_DAYS)
        cached_query(con, "fleet_utilisation", team=one, start=window_start(data.as_of, WINDOW_DAYS))
        queries.recommendations(con, team=one)

    def fleet(con):
        as_of = cached_query(con, "latest_charge_day", team=team)
        start = window_start(as_of, WINDOW_DAYS)
        cached_query(con, "fleet_utilisation", team=team, start=start)
        cached_query(con, "idle_gpu_cost", team=team, start=start, idle_util_pct=5.0)
        if team is None:
            cached_query(con, "unattributed_gpu_hours")
            cached_query(con, "gpu_hours_attribution", start=start)

    return {"overview": overview, "team": team_page, "fleet": fleet}


def forecast_load(team: list[str] | None) -> Callable:
    """The forecast model's fit (models.forecast), which the dashboard caches per data version."""
    from gpufinops.models.forecast import cost_anomalies, cost_forecast

    def run(con):
        as_of = queries.latest_charge_day(con, team=team)
        cost_forecast(con, teams=team, as_of=as_of + timedelta(days=1))
        cost_anomalies(con, teams=team, start=as_of - timedelta(days=WINDOW_DAYS - 1), end=as_of + timedelta(days=1))

    return run


def measure_page(path: Path, load: Callable, loads: int) -> dict[str, float]:
    load_times = []
    for _ in range(loads + 1):
        started = time.perf_counter()
        with db.reader(path) as con:  # a new read-only connection per render, like the dashboard
            load(con)
        load_times.append((time.perf_counter() - started) * 1000)
    times = sorted(load_times[1:])  # the first load warms the OS cache
    p95 = times[min(len(times) - 1, round(0.95 * len(times)) - 1)]
    return {"p50_ms": round(statistics.median(times), 1), "p95_ms": round(p95, 1), "max_ms": round(times[-1], 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="200k line items, 10 loads per page")
    parser.add_argument("--line-items", type=int)
    parser.add_argument("--loads", type=int)
    parser.add_argument("--cached-only", action="store_true", help="only the cached page renders")
    args = parser.parse_args(argv)
    line_items = args.line_items or (200_000 if args.quick else 10_000_000)
    loads = args.loads or (10 if args.quick else 50)
    path = CACHE_DIR / f"v{GENERATOR_VERSION}-{line_items}.duckdb"
    if not path.exists():
        print(f"dashboard bench: generating a warehouse of {line_items:,} line items in {path} …", flush=True)
        started = time.perf_counter()
        tmp = path.with_suffix(".tmp.duckdb")
        tmp.unlink(missing_ok=True)
        generate(tmp, line_items)
        tmp.rename(path)
        print(f"  generated in {time.perf_counter() - started:.0f} s", flush=True)
    db.prepare(path, memory_limit="3GB")  # a warehouse generated before the latest migrations is upgraded
    with db.reader(path) as con:
        rows = con.execute("SELECT count(*) FROM cost_line_items").fetchall()[0][0]
    if rows != line_items:
        print(f"dashboard bench: {path} holds {rows:,} line items, not {line_items:,}", file=sys.stderr)
        return 1
    print(
        f"dashboard bench: {rows:,} line items, {loads} loads per page, 1-minute load average "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs",
        flush=True,
    )
    os.environ["GPUFINOPS_DB"] = str(path)  # the dashboard's cache keys on the warehouse it reads
    for viewer, team in (("finance", None), ("lead", ["vision"])):
        for page, load in cached_page_loads(team).items():
            _report(
                f"dashboard {page} ({viewer}, render, cached)", rows, loads, measure_page(path, load, loads), TARGET_MS
            )
        if args.cached_only:
            continue
        for page, load in page_loads(team).items():
            _report(f"dashboard {page} ({viewer})", rows, loads, measure_page(path, load, loads), TARGET_MS)
        _report(
            f"forecast model ({viewer}, cached)",
            rows,
            FORECAST_LOADS,
            measure_page(path, forecast_load(team), FORECAST_LOADS),
            None,
        )
    return 0


def _report(label: str, rows: int, loads: int, times: dict[str, float], target_ms: float | None) -> None:
    figure = {"label": label, "line_items": rows, "loads": loads, **times, "loadavg_1m": os.getloadavg()[0]}
    check = (
        ""
        if target_ms is None
        else f"   [{'PASS' if times['p95_ms'] <= target_ms else 'FAIL'} p95 ≤ {target_ms:.0f} ms]"
    )
    print(
        f"{label:<46} p50 {times['p50_ms']:8.1f} ms  p95 {times['p95_ms']:8.1f} ms  max {times['max_ms']:8.1f} ms"
        f"{check}",
        flush=True,
    )
    RESULTS_FILE.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS_FILE.open("a", encoding="utf-8") as out:
        out.write(json.dumps({**figure, "at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}) + "\n")


if __name__ == "__main__":
    sys.exit(main())
