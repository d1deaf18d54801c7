"""The hourly rollup's one-pass plan gives what the plain definitions give (real DuckDB, real Parquet).

* workload labels: an hour's namespace / pod / container are the values most of its samples carry,
  whether the hour has one value (found in the single pass) or several (found again from that hour's
  samples alone), NULLs not counted;
* the workload rows' occupied samples, summed from the workloads when the samples are unique, equal
  the distinct sample times the deduplicating plan counts;
* a load's metric slices are re-resolved once per table and source, not once per batch.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpufinops.derived import attribution
from gpufinops.ingest.metrics import metrics_store, workloads

START = datetime(2026, 10, 1, tzinfo=UTC)


def _samples(tmp_path, rows: list[dict]) -> str:
    columns = {f.name: [r.get(f.name) for r in rows] for f in metrics_store.SAMPLE_SCHEMA}
    path = tmp_path / "day.parquet"
    pq.write_table(pa.table(columns, schema=metrics_store.SAMPLE_SCHEMA), path)
    return f"read_parquet('{path}')"


def _row(minute: int, gpu: str, namespace=None, pod=None, util=50.0) -> dict:
    return {
        "ts": START + timedelta(minutes=minute),
        "gpu_uuid": gpu,
        "host": "node-1",
        "namespace": namespace,
        "pod": pod,
        "container": "main" if pod else None,
        "util": util,
    }


def _hourly(con, relation: str, deduplicate: bool | str) -> dict:
    if deduplicate == "labels from the workload rows":  # dcgm_exporter's plan for unique samples
        running = workloads.rollup_table(con, relation, source="s", run_id="r", deduplicate=False)
        table = metrics_store.hourly_table(con, relation, run_id="r", deduplicate=False, workloads=running)
        sql = metrics_store.attributed_tables_sql(con, [table], source="s", run_id="r")
    else:
        sql = metrics_store.rollup_sql(con, relation, source="s", run_id="r", deduplicate=bool(deduplicate))
    rows = con.execute(f"SELECT hour, gpu_uuid, namespace, pod, container, samples FROM ({sql}) ORDER BY 1, 2")
    return {(h.astimezone(UTC).hour, g): (ns, pod, c, n) for h, g, ns, pod, c, n in rows.fetchall()}


@pytest.mark.parametrize("deduplicate", [False, True, "labels from the workload rows"])
def test_labels_are_the_hours_most_frequent_values(tmp_path, deduplicate):
    rows = []
    for m in range(60):  # hour 0, GPU a: one pod all hour
        rows.append(_row(m, "a", "ml", "p1"))
    for m in range(60, 120):  # hour 1, GPU a: 40 minutes of p2, 15 of p3, 5 without a pod
        pod = "p2" if m < 100 else "p3" if m < 115 else None
        rows.append(_row(m, "a", "ml" if pod == "p2" else "cv" if pod else None, pod))
    for m in range(60):  # hour 0, GPU b: no labels at all; hour 1: ten labelled minutes among unlabelled ones
        rows.append(_row(m, "b"))
        rows.append(_row(60 + m, "b", "cv" if m % 6 == 0 else None, "p9" if m % 6 == 0 else None))
    relation = _samples(tmp_path, rows)
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    got = _hourly(con, relation, deduplicate)
    assert got == {
        (0, "a"): ("ml", "p1", "main", 60),
        (1, "a"): ("ml", "p2", "main", 60),
        (0, "b"): (None, None, None, 60),
        (1, "b"): ("cv", "p9", "main", 60),
    }
    # the same as mode() over every sample of the hour, the definition
    plain = con.execute(
        f"SELECT extract(hour FROM ts), gpu_uuid, mode(namespace), mode(pod), mode(container) FROM {relation} "
        f"GROUP BY ALL"
    ).fetchall()
    assert {(int(h), g): (ns, p, c) for h, g, ns, p, c in plain} == {k: v[:3] for k, v in got.items()}


def test_occupied_samples_from_unique_samples_match_the_distinct_times(tmp_path):
    rows = [_row(m, "a", "ml", "p1" if m < 35 else "p2") for m in range(50)] + [
        _row(m, "b", "ml", "q") for m in range(7)
    ]
    relation = _samples(tmp_path, rows)
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    query = "SELECT gpu_uuid, pod, samples, occupied_samples, sharing FROM ({}) ORDER BY 1, 2"
    fast = con.execute(query.format(workloads.samples_sql(relation, source="s", run_id="r", deduplicate=False)))
    fast_rows = fast.fetchall()
    plain = con.execute(query.format(workloads.samples_sql(relation, source="s", run_id="r", deduplicate=True)))
    assert fast_rows == plain.fetchall()
    assert fast_rows == [("a", "p1", 35, 50, None), ("a", "p2", 15, 50, None), ("b", "q", 7, 7, None)]


def test_metric_slices_merge_per_table_and_source():
    expr = metrics_store.HOUR_SLICE_SQL
    merged = attribution.merged_slices(
        [
            ("gpu_metrics_hourly", "dcgm", expr, ["2026-10-01T00", "2026-10-01T01"]),
            ("gpu_metrics_hourly", "dcgm", expr, ["2026-10-02T00", "2026-10-01T01"]),
            ("gpu_processes_hourly", "smi", expr, ["2026-10-01T00"]),
            ("gpu_processes_hourly", "smi", expr, []),  # the whole source absorbs its slices
            ("gpu_processes_hourly", "smi", expr, ["2026-10-03T00"]),
        ]
    )
    assert merged == [
        ("gpu_metrics_hourly", "dcgm", expr, ["2026-10-01T00", "2026-10-01T01", "2026-10-02T00"]),
        ("gpu_processes_hourly", "smi", expr, []),
    ]


def _day_file(folder, name: str, rows: list[dict], shared: bool = False, day: datetime = START) -> str:
    columns = {f.name: [r.get(f.name) for r in rows] for f in metrics_store.SAMPLE_SCHEMA}
    table = pa.table(columns, schema=metrics_store.SAMPLE_SCHEMA)
    if shared:
        table = table.replace_schema_metadata({metrics_store.SHARED_KEY: b"1"})
    path = folder / f"day={day:%Y-%m-%d}" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return str(path)


def test_only_the_hours_two_files_share_are_grouped_per_time(tmp_path):
    """A re-scrape of minute 70 beside the day's file: hour 1 is grouped per time, hours 0 and 2 are one
    pass, and the day's rows are those of grouping every hour (the re-scraped minute counted once)."""
    base = [_row(m, g, "ml", "p1", util=float(m % 7)) for m in range(180) for g in ("a", "b")]
    _day_file(tmp_path, "base.parquet", base)
    _day_file(tmp_path, "rescrape.parquet", [_row(70, "a", "ml", "p1", util=99.0)])
    hours = [f"{START:%Y-%m-%d}T{h:02d}" for h in range(24)]
    assert metrics_store.dedup_hours(metrics_store.day_files(tmp_path, f"{START:%Y-%m-%d}"), hours) == {hours[1]}
    parts = metrics_store.rollup_parts(tmp_path, f"{START:%Y-%m-%d}", hours)
    assert parts == [([h for h in hours if h != hours[1]], False), ([hours[1]], True)]
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    tables = []
    for k, (part_hours, deduplicate) in enumerate(parts):
        relation, _ = metrics_store.store_relation(tmp_path, {f"{START:%Y-%m-%d}": part_hours})
        tables.append(metrics_store.hourly_table(con, relation, run_id="r", deduplicate=deduplicate, part=f"_{k}"))
    split = metrics_store.attributed_tables_sql(con, [metrics_store.merge_tables(con, tables)], source="s", run_id="r")
    whole, _ = metrics_store.store_relation(tmp_path, {f"{START:%Y-%m-%d}": hours})
    grouped = metrics_store.rollup_sql(con, whole, source="s", run_id="w", deduplicate=True, part="_w")
    columns = "* EXCLUDE (ingest_run_id)"
    got = con.execute(f"SELECT {columns} FROM ({split}) ORDER BY hour, gpu_uuid").fetchall()
    assert got == con.execute(f"SELECT {columns} FROM ({grouped}) ORDER BY hour, gpu_uuid").fetchall()
    assert [(r[0].astimezone(UTC).hour, r[1], r[15]) for r in got if r[1] == "a"] == [
        (0, "a", 60),
        (1, "a", 60),
        (2, "a", 60),
    ]


def test_a_file_of_shared_gpus_has_its_hours_grouped_per_time(tmp_path):
    _day_file(tmp_path, "base.parquet", [_row(m, "a") for m in range(60)])
    _day_file(tmp_path, "shared.parquet", [_row(m, "b", "ml", p) for m in range(120, 130) for p in ("p1", "p2")], True)
    hours = [f"{START:%Y-%m-%d}T{h:02d}" for h in range(24)]
    assert metrics_store.dedup_hours(metrics_store.day_files(tmp_path, f"{START:%Y-%m-%d}"), hours) == {hours[2]}


def test_the_hour_number_is_the_utc_hour_before_1970_too():
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    stamps = [
        "1969-12-31 23:59:59.5+00",
        "1969-12-31 23:00:00+00",
        "1970-01-01 00:00:00+00",
        "2026-10-01 05:59:59.999999+00",
    ]
    for ts in stamps:
        value = f"TIMESTAMPTZ '{ts}'"
        same = f"SELECT {metrics_store.hour_sql(metrics_store.hour_number_sql(value))} = date_trunc('hour', {value})"
        assert con.execute(same).fetchall() == [(True,)], ts


def test_days_rolled_up_together_keep_each_days_gpu_models(tmp_path):
    """Two days in one statement (one table) name each day's GPU model from that day's memory, as two
    tables of one day each did: the same name is an A100-40GB on the first day, an 80GB on the second."""
    days = [START, START + timedelta(days=1)]
    for day, memory in zip(days, (40960.0, 81920.0)):
        rows = [
            {**_row(m, "a"), "ts": day + timedelta(minutes=m), "name": "NVIDIA A100-SXM4", "mem_total_mib": memory}
            for m in range(120)
        ]
        _day_file(tmp_path, "base.parquet", rows, day=day)
    plan = {f"{day:%Y-%m-%d}": [f"{day:%Y-%m-%d}T{h:02d}" for h in range(24)] for day in days}
    statements = metrics_store.rollup_statements(tmp_path, plan)
    assert statements == [(plan, False)]  # both days in one statement
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    relation, _ = metrics_store.store_relation(tmp_path, plan)
    together = metrics_store.attributed_days_sql(
        con, metrics_store.hourly_table(con, relation, run_id="r", deduplicate=False), source="s", run_id="r"
    )
    apart = []
    for n, day in enumerate(plan):
        one, _ = metrics_store.store_relation(tmp_path, {day: plan[day]})
        apart.append(metrics_store.hourly_table(con, one, run_id="r", deduplicate=False, part=f"_{n}"))
    query = "SELECT hour, gpu_uuid, gpu_model, samples FROM ({}) ORDER BY 1, 2"
    got = con.execute(query.format(together)).fetchall()
    assert (
        got
        == con.execute(query.format(metrics_store.attributed_tables_sql(con, apart, source="s", run_id="r"))).fetchall()
    )
    assert [(h.astimezone(UTC).day, model) for h, _, model, _ in got] == [(1, "A100-40GB")] * 2 + [(2, "A100-80GB")] * 2


def test_a_statement_holds_at_most_batch_samples(tmp_path, monkeypatch):
    days = [START + timedelta(days=d) for d in range(3)]
    for day in days:
        _day_file(
            tmp_path, "base.parquet", [{**_row(m, "a"), "ts": day + timedelta(minutes=m)} for m in range(10)], day=day
        )
    plan = {f"{day:%Y-%m-%d}": [f"{day:%Y-%m-%d}T00"] for day in days}
    monkeypatch.setattr(metrics_store, "BATCH_SAMPLES", 20)
    statements = metrics_store.rollup_statements(tmp_path, plan)
    assert [list(s) for s, _ in statements] == [list(plan)[:2], list(plan)[2:]]
