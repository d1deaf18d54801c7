"""Benchmark: a fleet's month end to end, in both arrival orders, each stage beside its DuckDB floor.

Generates once (``bench/month_data.py``; cached under ``bench/.cache/month/``, so a re-run measures only
the product) one billing month of a fleet as a real account delivers it: a CUR 2.0 month (~5,000 line
items per GPU: 50M for 10,000 GPUs, the account's CPU instances among them) and 30 days of one-minute
DCGM samples of every GPU (432M for 10,000), the 8-GPU instances being shared Kubernetes nodes whose
GPUs run pods. Then, each step in a fresh process (its peak RSS is its own), under the product's default
DuckDB memory limit (``warehouse.db.DEFAULT_MEMORY_LIMIT``, 2 GB; ``--memory-limit`` sets another):

1. **bill first**: ``aws_cur`` loads the month; ``dcgm_exporter`` rolls the samples up to hourly GPU
   rows, attributes them and allocates the shared nodes' GPU-hours to their pods (the runner's own
   ``allocation.apply``, timed apart); every model runs;
2. **metrics first** (the live order): the rollup first (nothing to attribute to yet), then the bill,
   whose load re-attributes every GPU-hour and allocates inside its transaction; every model runs;
3. the two warehouses are compared: resource and team of every GPU-hour, cost of every allocation row;
4. **a restated month**: AWS re-delivers the month; the re-attribution that load does is timed apart;
5. DuckDB's floors from the same run: a ``CREATE TABLE AS`` of the CUR Parquet, the hourly aggregates of
   the samples as one plain ``GROUP BY``, and a ``CREATE TABLE AS`` of the allocation's own rows and of
   the carbon rows that step rebuilds with them (timed apart from the allocation); beside them, the
   *least allocation*: the bill's GPU lines read once, one join of the workload rows with their GPU-hours,
   one grouping for each GPU-hour's idle rest, its rows written (what any allocation of those rows does at
   the least; not in the sum of the floors).

Each stage prints beside its floor (seconds and CPU seconds: on a shared machine CPU time is the
steadier figure).

    python -m bench.bench_month                 # 10,000 GPUs × 30 days
    python -m bench.bench_month --gpus 1000     # what a 2-core laptop measures in ~10 minutes
    python -m bench.bench_month --quick         # 200 GPUs × 3 days (`make bench-quick`)
    python -m bench.bench_month --memory-limit 4GB   # under another DuckDB memory limit

Targets: rollup + attribution ≤ 2× its GROUP BY floor in either order, the whole month ≤ the sum of
its floors, every model ≤ 60 s, peak RSS < 4 GiB. Figures, not tests: a missed target prints FAIL,
exit 0; different answers in the two orders exit 1.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from bench import month_data as data
from bench.harness import Target, format_line, measure_in_subprocess, report
from gpufinops.derived import allocation, attribution, carbon

# Imported here, not in the measured calls (as bench_rollup does): a stage's figure is its work, not the
# interpreter's imports, which its floor (DuckDB alone) does not pay either. default_registry() imports
# every ingestor module once here, so a stage's own call finds them loaded.
from gpufinops.ingest.core.registry import default_registry
from gpufinops.ingest.core.runner import run_source
from gpufinops.models.run import analyse
from gpufinops.warehouse import db

default_registry()
# pyarrow imports pandas, where it is installed, on the first array it builds from Python objects (a
# scrape's parse, a source's rules): an import too, 0.4 CPU s of a stage that would bill it otherwise.
pa.array([0])

RESULTS_FILE = data.CACHE_DIR / "results.jsonl"
MEMORY_LIMIT = db.DEFAULT_MEMORY_LIMIT  # what a job runs under unless [warehouse] memory_limit says otherwise
RSS = Target("peak_rss_mib", "<", 4096, "RSS < 4 GiB")


def _timed(module: Any, name: str, spent: dict[str, float]) -> None:
    """Wrap ``module.name`` so that the seconds (wall and CPU) spent in it add up in ``spent`` (the runner
    calls ``attribution.apply`` and ``allocation.apply`` through their modules: the wrapper is what runs)."""
    inner, key = getattr(module, name), module.__name__.rsplit(".", 1)[-1]

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[f"{key}_s"] = spent.get(f"{key}_s", 0.0) + time.perf_counter() - wall
            spent[f"{key}_cpu_s"] = spent.get(f"{key}_cpu_s", 0.0) + time.process_time() - cpu

    setattr(module, name, wrapper)


def _run(
    db_path: str, source: str, source_type: str, options: dict[str, Any], tags: tuple, memory_limit: str
) -> dict[str, Any]:
    spent: dict[str, float] = {}
    _timed(attribution, "apply", spent)
    _timed(allocation, "apply", spent)
    _timed(carbon, "recompute", spent)  # inside the allocation's: its carbon rows, reported apart
    result = run_source(
        default_registry(), db_path, source, source_type, options, team_tag_keys=tags, memory_limit=memory_limit
    )
    if result.status != "succeeded":
        raise RuntimeError(f"{source_type} ended {result.status}: {result.error}")
    keys = ("attribution_s", "attribution_cpu_s", "allocation_s", "allocation_cpu_s", "carbon_s", "carbon_cpu_s")
    return {"rows": result.rows, **{k: round(spent.get(k, 0.0), 3) for k in keys}}


def load_cur(db_path: str, cur: str, memory_limit: str = MEMORY_LIMIT) -> dict[str, Any]:
    return _run(db_path, data.CUR_SOURCE, "aws_cur", {"path": cur, "format": "cur2"}, data.TAGS, memory_limit)


def rollup(db_path: str, scrape: str, memory_limit: str = MEMORY_LIMIT) -> dict[str, Any]:
    return _run(db_path, data.GPU_SOURCE, "dcgm_exporter", {"targets": [scrape]}, (), memory_limit)


def models(db_path: str, memory_limit: str = MEMORY_LIMIT) -> dict[str, Any]:
    with db.writer(db_path, memory_limit=memory_limit) as con:
        run = analyse(con)
        hours = con.execute("SELECT count(*) FROM gpu_metrics_hourly").fetchall()[0][0]
    return {"rows": hours, "recommendations": len(run.recommendations), "withheld": len(run.withheld)}


def reattribute_month(db_path: str, memory_limit: str = MEMORY_LIMIT) -> dict[str, Any]:
    """The re-attribution a restated month's load does inside its transaction: every GPU-hour whose
    resource the month's line items name, resolved again (here on its own, so it can be timed)."""
    with db.writer(db_path, memory_limit=memory_limit) as con:
        con.execute("BEGIN TRANSACTION")
        attribution.capture_cost_ids(con, '"x_Source" = ?', [data.CUR_SOURCE])
        attribution.apply(con, attribution.Touched(cost_sources={data.CUR_SOURCE}))
        rows = con.execute("SELECT count(*) FROM gpu_metrics_hourly").fetchall()[0][0]
        con.execute("COMMIT")
    return {"rows": rows}


def _floor_con(db_path: str, memory_limit: str) -> Any:
    con = duckdb.connect(db_path)
    con.execute(f"SET memory_limit = '{memory_limit}'")
    con.execute("SET enable_progress_bar = false")
    con.execute(f"SET temp_directory = '{Path(db_path).parent / 'floor_tmp'}'")
    return con


def floor_ctas(db_path: str, cur: str, memory_limit: str = MEMORY_LIMIT) -> dict[str, Any]:
    files = sorted(str(p) for p in Path(cur).rglob("*.parquet"))
    Path(db_path).unlink(missing_ok=True)
    con = _floor_con(db_path, memory_limit)
    con.execute(f"CREATE TABLE t AS SELECT * FROM read_parquet({files!r})")
    rows = con.execute("SELECT count(*) FROM t").fetchall()[0][0]
    con.close()
    return {"rows": rows}


def _day_batches(con, files: list[str]) -> list[list[str]]:
    """The store's files in consecutive days of at most ``metrics_store.BATCH_SAMPLES`` samples a batch (a
    day is never split): the bound the product's rollup groups under, so that the floor keeps its p95's
    values in the same memory. One GROUP BY of a 10,000-GPU month's 432M samples under a 4 GB limit
    spills every value to disk (it filled 60 GB here and failed)."""
    from gpufinops.ingest.metrics.metrics_store import BATCH_SAMPLES

    days: dict[str, list[str]] = {}
    for f in files:
        days.setdefault(Path(f).parent.name, []).append(f)
    counts = dict(
        con.execute("SELECT file_name, sum(row_group_num_rows) FROM parquet_metadata(?) GROUP BY 1", [files]).fetchall()
    )
    batches: list[list[str]] = []
    size = 0
    for day in sorted(days):
        samples = sum(counts[f] for f in days[day])
        if batches and size + samples <= BATCH_SAMPLES:
            batches[-1].extend(days[day])
            size += samples
        else:
            batches.append(list(days[day]))
            size = samples
    return batches


def floor_group_by(db_path: str, store: str, memory_limit: str = MEMORY_LIMIT) -> dict[str, Any]:
    """The hourly GROUP BY of every sample, in the day batches the rollup itself groups (``_day_batches``)."""
    files = sorted(str(p) for p in Path(store).rglob("*.parquet"))
    Path(db_path).unlink(missing_ok=True)
    con = _floor_con(db_path, memory_limit)
    batches = _day_batches(con, files)
    for i, batch in enumerate(batches):
        into = "CREATE TABLE t AS" if i == 0 else "INSERT INTO t"
        con.execute(f"""{into} SELECT date_trunc('hour', ts) AS hour, gpu_uuid, avg(util), quantile_cont(util, 0.95),
                        max(util), max(mem_used_mib), avg(sm_active), avg(power_w), count(*)
                        FROM read_parquet({batch!r}) GROUP BY 1, 2""")
    rows = con.execute("SELECT count(*) FROM t").fetchall()[0][0]
    con.close()
    return {"rows": rows, "samples": len(files), "batches": len(batches)}


def floor_allocation_write(db_path: str, memory_limit: str = MEMORY_LIMIT) -> dict[str, Any]:
    """Writing the allocation's own rows once: a CREATE TABLE AS of gpu_allocation_hourly."""
    return _write_floor(db_path, "gpu_allocation_hourly", memory_limit)


def floor_carbon_write(db_path: str, memory_limit: str = MEMORY_LIMIT) -> dict[str, Any]:
    """Writing the carbon rows the allocation rebuilds once: a CREATE TABLE AS of carbon_hourly."""
    return _write_floor(db_path, "carbon_hourly", memory_limit)


def floor_allocation_least(db_path: str, memory_limit: str = MEMORY_LIMIT) -> dict[str, Any]:
    """The least any allocation of the month does: the bill's GPU usage lines of the shared resources read
    once (as ``derived/gpu_lines.py`` does), each workload row joined with its GPU-hour and that hour's
    GPU cost (its share: its samples over the GPU-hour's), one grouping for each GPU-hour's idle rest, and
    the rows written. No MIG units, time-slicing, spread rule or exact largest-remainder cents: what the
    product adds to this is its own cost, measured against this floor."""
    from gpufinops.warehouse.queries.fragments import GPU_USAGE

    con = _floor_con(db_path, memory_limit)
    con.execute("SET preserve_insertion_order = false")
    con.execute(f"""CREATE OR REPLACE TEMP TABLE _lines AS
        SELECT "ResourceId" AS resource_id, epoch_us("ChargePeriodStart") // 3600000000 AS h,
               sum("EffectiveCost") AS cost, max("x_GpuCount") AS gpus
        FROM cost_line_items c
        WHERE "ChargeCategory" = 'Usage' AND "ResourceId" IS NOT NULL AND {GPU_USAGE}
          AND "ResourceId" IN (SELECT DISTINCT resource_id FROM gpu_metrics_hourly
                               SEMI JOIN (SELECT DISTINCT gpu_uuid FROM gpu_workloads_hourly) USING (gpu_uuid))
        GROUP BY ALL""")
    rows = con.execute("""CREATE OR REPLACE TABLE _least AS
        WITH gh AS (
            SELECT m.hour, m.gpu_uuid, m.resource_id, m.team, m.samples, l.cost / l.gpus AS gpu_cost
            FROM gpu_metrics_hourly m JOIN _lines l ON l.resource_id = m.resource_id AND l.h = epoch_us(m.hour) // 3600000000),
        w AS (
            SELECT gh.hour, gh.gpu_uuid, gh.resource_id, gh.team, gh.gpu_cost, w.namespace, w.pod, w.container,
                   w.samples / gh.samples AS share
            FROM gh JOIN gpu_workloads_hourly w ON w.gpu_uuid = gh.gpu_uuid AND w.hour = gh.hour)
        SELECT hour, resource_id, gpu_uuid, namespace, pod, container, team, share,
               CAST(gpu_cost * share AS DECIMAL(38, 15)) AS cost_usd, 'workload' AS basis FROM w
        UNION ALL
        SELECT hour, resource_id, gpu_uuid, NULL, NULL, NULL, team, 1 - sum(share),
               CAST(any_value(gpu_cost) * (1 - sum(share)) AS DECIMAL(38, 15)), 'unallocated' FROM w
        GROUP BY hour, resource_id, gpu_uuid, team HAVING sum(share) < 1""").fetchall()[0][0]
    con.execute("DROP TABLE _least")
    con.close()
    return {"rows": int(rows)}


def _write_floor(db_path: str, table: str, memory_limit: str) -> dict[str, Any]:
    con = _floor_con(db_path, memory_limit)
    con.execute("SET preserve_insertion_order = false")
    rows = con.execute(f"CREATE OR REPLACE TABLE _written AS SELECT * FROM {table}").fetchall()[0][0]
    con.execute("DROP TABLE _written")
    con.close()
    return {"rows": int(rows)}


def digest(db_path: str) -> str:
    con = duckdb.connect(db_path, read_only=True)
    hours = con.execute("SELECT count(*), sum(hash(hour, gpu_uuid, resource_id, team)) FROM gpu_metrics_hourly")
    metric = hours.fetchall()[0]
    alloc = con.execute("SELECT count(*), sum(cost_usd) FROM gpu_allocation_hourly").fetchall()[0]
    con.close()
    return f"{metric[0]}:{metric[1]} / {alloc[0]}:{alloc[1]}"


def _redeliver(cur: Path) -> None:
    """AWS restates the month: a new delivery (execution) of the period's files."""
    from gpufinops.ingest.aws.aws_cur2_format import write_manifest

    keys = [f"s3://billing/{p.relative_to(cur).as_posix()}" for p in sorted(cur.rglob("*.parquet"))]
    write_manifest(cur, data.EXPORT, data.PERIOD, keys, f"restated-{uuid.uuid4()}")


ORDERS = {
    "bill first": [("CUR 2.0 load", "load_cur"), ("metrics rollup + attribution", "rollup"), ("every model", "models")],
    "metrics first": [
        ("metrics rollup (nothing billed yet)", "rollup"),
        ("CUR 2.0 load + re-attribution", "load_cur"),
        ("every model", "models"),
    ],
}


def _line(label: str, wall: float, cpu: float, floor: str, floor_wall: float, floor_cpu: float, most: float) -> str:
    """A stage beside its floor: seconds and CPU seconds of each, their ratios, the verdict on CPU time
    (the steadier figure on a shared machine; on a quiet one the two ratios agree)."""
    if not floor:
        return f"  {label:<34} {wall:8.2f} s {cpu:8.2f} s"
    ratio_cpu = cpu / floor_cpu if floor_cpu else float("inf")
    verdict = f"[{'PASS' if ratio_cpu <= most else 'FAIL'} ≤ {most:g}×]" if most else "(no target)"
    return (
        f"  {label:<34} {wall:8.2f} s {cpu:8.2f} s   {floor:<24} {floor_wall:8.2f} s {floor_cpu:8.2f} s  "
        f"{wall / floor_wall if floor_wall else float('inf'):5.2f}× {ratio_cpu:5.2f}× {verdict}"
    )


def run(gpus: int, days: int, memory_limit: str = MEMORY_LIMIT) -> int:
    figure = measure_in_subprocess("generate month (cached)", "bench.month_data:generate", {"gpus": gpus, "days": days})
    print(format_line(figure), flush=True)
    home = data.home_of(gpus, days)
    cur, scrape = home / "cur", data.scrape_file(home)
    stages: dict[str, dict[str, dict[str, Any]]] = {}
    dbs = {}
    for order, steps in ORDERS.items():
        db_path = data.warehouse(home, order.replace(" ", "_"))
        with db.writer(db_path):  # built to the schema before either order starts, as a deployed one is:
            pass  # the first stage measures its load, not the warehouse's creation
        dbs[order] = db_path
        for label, step in steps:
            kwargs = {"db_path": str(db_path), "memory_limit": memory_limit}
            kwargs.update(
                {"cur": str(cur)} if step == "load_cur" else {"scrape": str(scrape)} if step == "rollup" else {}
            )
            fig = measure_in_subprocess(f"{order}: {label}", f"bench.bench_month:{step}", kwargs)
            report(fig, targets=[RSS], results_file=RESULTS_FILE)
            stages.setdefault(order, {})[step] = fig
    digests = {order: digest(str(path)) for order, path in dbs.items()}
    same = len(set(digests.values())) == 1
    print(f"  both orders give the same resource and team for every GPU-hour and allocation row: {same}", flush=True)
    floor_db = str(home / "floor.duckdb")
    limit = {"memory_limit": memory_limit}
    floors = {
        "ctas": measure_in_subprocess("floor: CREATE TABLE AS of the CUR", "bench.bench_month:floor_ctas",
                                      {"db_path": floor_db, "cur": str(cur), **limit}),
        "group": measure_in_subprocess("floor: hourly GROUP BY of samples", "bench.bench_month:floor_group_by",
                                       {"db_path": floor_db, "store": str(data.store_of(home)), **limit}),
        "write": measure_in_subprocess("floor: CTAS of the allocation rows", "bench.bench_month:floor_allocation_write",
                                       {"db_path": str(dbs["bill first"]), **limit}),
        "carbon": measure_in_subprocess("floor: CTAS of the carbon rows", "bench.bench_month:floor_carbon_write",
                                        {"db_path": str(dbs["bill first"]), **limit}),
    }  # fmt: skip
    least = measure_in_subprocess("the least allocation (not a floor of the sum)",
                                  "bench.bench_month:floor_allocation_least", {"db_path": str(dbs["bill first"]), **limit})  # fmt: skip
    for fig in [*floors.values(), least]:
        report(fig, results_file=RESULTS_FILE)
    _summary(stages, floors, least)
    _redeliver(cur)
    restated = measure_in_subprocess(
        "restated month: CUR 2.0 re-load",
        "bench.bench_month:load_cur",
        {"db_path": str(dbs["bill first"]), "cur": str(cur), **limit},
    )
    report(restated, results_file=RESULTS_FILE)
    reattr = measure_in_subprocess(
        "restated month: its re-attribution",
        "bench.bench_month:reattribute_month",
        {"db_path": str(dbs["bill first"]), **limit},
    )
    reattr["share_of_load"] = round(reattr["seconds"] / restated["seconds"], 3)
    report(reattr, targets=[Target("share_of_load", "<=", 0.10, "≤ 10 % of the load")], results_file=RESULTS_FILE)
    Path(floor_db).unlink(missing_ok=True)
    shutil.rmtree(home / "floor_tmp", ignore_errors=True)
    for db_path in dbs.values():
        shutil.rmtree(db_path.parent, ignore_errors=True)
    return 0 if same else 1


def _both(cur: dict[str, Any], roll: dict[str, Any], key: str) -> tuple[float, float]:
    """(wall, CPU) seconds spent in ``key`` (attribution or allocation) by the CUR load and the rollup."""
    return cur[f"{key}_s"] + roll[f"{key}_s"], cur[f"{key}_cpu_s"] + roll[f"{key}_cpu_s"]


def _summary(
    stages: dict[str, dict[str, dict[str, Any]]], floors: dict[str, dict[str, Any]], least: dict[str, Any]
) -> None:
    """Each stage beside its floor from this run: the CUR load (less the attribution and allocation it
    does) against the CTAS, the rollup + attribution against the GROUP BY, the allocation against
    writing its rows and the carbon rows it rebuilds (derived/carbon.py, inside the allocation's step)
    against writing theirs; the whole month against the sum of the floors."""
    fw = {k: floors[k]["seconds"] for k in floors}
    fc = {k: floors[k]["cpu_seconds"] for k in floors}
    print(f"\n  {'stage':<34} {'wall':>10} {'cpu':>10}   {'floor (same run)':<24} {'wall':>10} {'cpu':>10}  "
          f"ratio wall, cpu")  # fmt: skip
    for order, steps in stages.items():
        print(f"  {order}:")
        cur, roll, mod = steps["load_cur"], steps["rollup"], steps["models"]
        attrib, carb = _both(cur, roll, "attribution"), _both(cur, roll, "carbon")
        alloc = tuple(a - c for a, c in zip(_both(cur, roll, "allocation"), carb, strict=True))  # its own rows
        cur_own = (cur["seconds"] - cur["allocation_s"] - cur["attribution_s"],
                   cur["cpu_seconds"] - cur["allocation_cpu_s"] - cur["attribution_cpu_s"])  # fmt: skip
        roll_own = (roll["seconds"] - roll["allocation_s"] - roll["attribution_s"] + attrib[0],
                    roll["cpu_seconds"] - roll["allocation_cpu_s"] - roll["attribution_cpu_s"] + attrib[1])  # fmt: skip
        total = (sum(s["seconds"] for s in steps.values()), sum(s["cpu_seconds"] for s in steps.values()))
        lines = [
            ("CUR 2.0 load", *cur_own, "CTAS of the CUR lines", fw["ctas"], fc["ctas"], 1.0),
            ("metrics rollup + attribution", *roll_own, "GROUP BY of the samples", fw["group"], fc["group"], 2.0),
            ("  of which attribution", *attrib, "", 0, 0, 0),
            ("shared-GPU allocation", *alloc, "CTAS of its own rows", fw["write"], fc["write"], 1.5),
            ("  the same, against", *alloc, "the least allocation", least["seconds"], least["cpu_seconds"], 0),
            ("  the carbon rows it rebuilds", *carb, "CTAS of the carbon rows", fw["carbon"], fc["carbon"], 1.5),
            ("every model (target ≤ 60 s)", mod["seconds"], mod["cpu_seconds"], "", 0, 0, 0),
            ("the whole month", *total, "sum of the floors", sum(fw.values()), sum(fc.values()), 1.0),
        ]
        for line in lines:
            print(_line(*line), flush=True)
        peak = max(s["peak_rss_mib"] for s in steps.values())
        print(f"  {'peak RSS of its steps':<34} {peak:8.0f} MiB [{'PASS' if peak < 4096 else 'FAIL'} < 4 GiB]")
    print(flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpus", type=int, default=None, help="fleet size (default 10,000)")
    parser.add_argument("--days", type=int, default=None, help="days of samples (default 30)")
    parser.add_argument("--quick", action="store_true", help="200 GPUs × 3 days")
    parser.add_argument("--memory-limit", default=MEMORY_LIMIT, help=f"DuckDB's memory limit (default {MEMORY_LIMIT})")
    args = parser.parse_args(argv)
    gpus = args.gpus or (200 if args.quick else 10_000)
    days = args.days or (3 if args.quick else 30)
    print(
        f"a fleet's month: {gpus:,} GPUs x {days} days, both arrival orders, DuckDB limit {args.memory_limit}",
        flush=True,
    )
    return run(gpus, days, args.memory_limit)


if __name__ == "__main__":
    sys.exit(main())
