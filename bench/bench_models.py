"""Benchmark: every recommendation model over 10,000 GPUs × 30 days of hourly rollups.

Generates (or reuses from ``bench/.cache/models/``) a warehouse built directly in DuckDB: ~1,850 AWS
GPU resources (8-, 4- and 1-GPU types in two regions, 10,000 GPUs in all) with one usage line per
resource-hour (1.33M line items) and one ``gpu_metrics_hourly`` row per GPU-hour (7.2M rows), with
mixed workloads: busy training, diurnal serving, idle machines, jobs using 2 of 8 GPUs, small models
on big GPUs, FP32 serving. Then, in a fresh process so its peak RSS is its own, runs every model in
``models.registry.MODELS`` (``run_models``: query, fit, recommend, store); target ≤ 60 s, peak RSS < 6 GiB.

    python -m bench.bench_models            # 10,000 GPUs × 30 days
    python -m bench.bench_models --quick    # 500 GPUs × 15 days
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.harness import REPO_ROOT, Target, cached_warehouse, measure_in_subprocess, report, sized_main

CACHE_DIR = REPO_ROOT / "bench" / ".cache" / "models"
RESULTS_FILE = CACHE_DIR / "results.jsonl"
START = datetime(2026, 9, 1, tzinfo=UTC)
TARGETS = [Target("seconds", "<=", 60, "≤ 60 s"), Target("peak_rss_mib", "<", 6144, "RSS < 6 GiB")]
# (instance type, GPU model, GPUs, $/h, GPU memory MiB) by resource number modulo 10
SHAPES = (
    [("p4d.24xlarge", "A100-40GB", 8, 21.957642, 40960)] * 3
    + [("p4de.24xlarge", "A100-80GB", 8, 27.44705, 81920)]
    + [("g5.12xlarge", "A10G", 4, 5.672, 23028)] * 3
    + [
        ("g6.xlarge", "L4", 1, 0.8048, 23034),
        ("p4de.24xlarge", "A100-80GB", 8, 27.44705, 81920),
        ("g5.xlarge", "A10G", 1, 1.006, 23028),
    ]
)
# workload profile by resource number modulo 7: util (mean, spread), memory share, workload tag, precision tag
PROFILES = [
    (90, 8, 0.85, "training", None),
    (40, 25, 0.7, "online_inference", "fp16"),
    (1, 1, 0.01, "training", None),
    (90, 8, 0.8, "training", None),
    (20, 5, 0.2, "online_inference", "fp16"),
    (40, 15, 0.75, "online_inference", "fp32"),
    (70, 25, 0.6, "batch_inference", "fp16"),
]


def _resources(gpus: int) -> list[tuple]:
    """(number, instance type, GPU model, GPUs, $/h, memory MiB, region, profile) until ``gpus`` GPUs;
    the last few GPUs are 1-GPU g5.xlarge machines."""
    rows, total, r = [], 0, 0
    while total < gpus:
        shape = SHAPES[r % len(SHAPES)]
        if shape[2] > gpus - total:
            shape = ("g5.xlarge", "A10G", 1, 1.006, 23028)
        rows.append((r, *shape, "us-east-1" if r % 2 else "us-west-2", r % len(PROFILES)))
        total += shape[2]
        r += 1
    return rows


def generate(gpus: int, days: int) -> Path:
    """The warehouse for ``gpus`` GPUs × ``days`` days, cached."""
    return cached_warehouse(CACHE_DIR / f"{gpus}gpus-{days}d", lambda path: _fill(path, gpus, days))


def _fill(path: Path, gpus: int, days: int) -> None:
    import pyarrow as pa

    from gpufinops.warehouse import db
    from gpufinops.warehouse.reference import refresh_gpu_specs

    res = _resources(gpus)
    names = ("r", "instance_type", "gpu_model", "gpu_count", "usd", "mem_mib", "region", "profile")
    table = pa.table({n: [row[i] for row in res] for i, n in enumerate(names)})
    prof = pa.table(
        {
            "profile": list(range(len(PROFILES))),
            "util": [p[0] for p in PROFILES],
            "spread": [p[1] for p in PROFILES],
            "mem_share": [p[2] for p in PROFILES],
            "workload": [p[3] for p in PROFILES],
            "precision": [p[4] for p in PROFILES],
        }
    )
    hours = days * 24
    with db.writer(path, memory_limit="3GB") as con:
        refresh_gpu_specs(con)
        con.register("res_in", table)
        con.register("prof", prof)
        con.execute("CREATE TEMP TABLE res AS SELECT * FROM res_in JOIN prof USING (profile)")
        con.execute(f"""
            INSERT INTO cost_line_items BY NAME
            SELECT 'AWS' AS "ProviderName", 'Usage' AS "ChargeCategory", printf('i-%016x', r) AS "ResourceId",
                   TIMESTAMPTZ '{START.isoformat()}' + to_hours(h) AS "ChargePeriodStart",
                   TIMESTAMPTZ '{START.isoformat()}' + to_hours(h + 1) AS "ChargePeriodEnd",
                   region AS "RegionId", instance_type AS "x_InstanceType", gpu_model AS "x_GpuModel",
                   gpu_count AS "x_GpuCount", 'Standard' AS "PricingCategory", printf('team-%02d', r % 20) AS "x_Team",
                   CAST(json_object('team', printf('team-%02d', r % 20), 'workload', workload, 'precision', precision)
                        AS JSON) AS "Tags",
                   'Hours' AS "ConsumedUnit", usd AS "ListUnitPrice", usd AS "ListCost", usd AS "EffectiveCost",
                   usd AS "BilledCost"
            FROM res, range({hours}) t(h)""")
        con.execute(f"""
            INSERT INTO gpu_metrics_hourly BY NAME
            WITH g AS (SELECT res.*, i FROM res, range(8) s(i) WHERE i < gpu_count)
            SELECT TIMESTAMPTZ '{START.isoformat()}' + to_hours(h) AS hour,
                   printf('GPU-%08d-%02d', r, i) AS gpu_uuid, gpu_model, printf('host-%05d', r) AS host,
                   printf('i-%016x', r) AS resource_id, printf('team-%02d', r % 20) AS team, u * 0.8 AS util_mean,
                   u AS util_p95, least(100, u + 3) AS util_max, mem_mib * (CASE WHEN spare THEN 0.01 ELSE mem_share END)
                   AS mem_used_max_mib, CAST(mem_mib AS DOUBLE) AS mem_total_mib, u / 110 AS sm_active_mean,
                   CASE WHEN precision = 'fp32' THEN 0.0 ELSE u / 200 END AS tensor_active_mean, 4 AS samples,
                   'bench' AS source
            FROM (SELECT g.*, h, (r % 11 = 3 AND i >= 2) AS spare,
                         CASE WHEN r % 11 = 3 AND i >= 2 THEN 1.0
                              ELSE greatest(0, least(100, util + spread * sin(2 * pi() * (h % 24) / 24)
                                                          + (hash(r, i, h) % 7) - 3)) END AS u
                  FROM g, range({hours}) t(h))""")
        con.execute("CHECKPOINT")


def models_run(db: str, gpu_hours: int) -> dict[str, Any]:
    """Every model over the warehouse (runs in the measured child process)."""
    import os

    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    import time

    from gpufinops.models import registry
    from gpufinops.models import run as run_mod
    from gpufinops.warehouse import db as warehouse_db

    seconds: dict[str, float] = {}
    started: dict[str, float] = {}

    def timed(kind: str, done: bool) -> None:
        if not done:
            started[kind] = time.perf_counter()
        else:
            seconds[kind] = round(time.perf_counter() - started[kind], 2)

    with warehouse_db.writer(db, memory_limit="4GB") as con:
        recs = run_mod.run_models(con, on_model=timed)
    kinds: dict[str, int] = {}
    for rec in recs:
        kinds[rec.kind] = kinds.get(rec.kind, 0) + 1
    return {
        "rows": gpu_hours,
        "models": len(registry.MODELS),
        "recommendations": len(recs),
        "by_kind": kinds,
        "seconds_by_kind": seconds,
    }


def run(gpus: int, days: int) -> int:
    path = generate(gpus, days)
    figure = measure_in_subprocess(
        f"all models, {gpus} GPUs x {days} days",
        "bench.bench_models:models_run",
        {"db": str(path), "gpu_hours": gpus * days * 24},
    )
    report(figure, targets=TARGETS, results_file=RESULTS_FILE)
    print(f"  per model (s): {figure.get('seconds_by_kind')}; findings: {figure.get('by_kind')}")
    if not figure.get("recommendations"):
        print("ERROR: the models found nothing in a fleet with planted waste")
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    title = "recommendation models: {} GPUs x {} days of hourly rollups"
    return sized_main(argv, __doc__, run, {"gpus": 10_000, "days": 30}, quick=(500, 15), title=title)


if __name__ == "__main__":
    sys.exit(main())
