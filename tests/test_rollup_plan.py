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

from gpufinops.ingest.metrics import metrics_store, workloads
from gpufinops.warehouse import attribution

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


def _hourly(con, relation: str, deduplicate: bool) -> dict:
    sql = metrics_store.rollup_sql(con, relation, source="s", run_id="r", deduplicate=deduplicate)
    rows = con.execute(f"SELECT hour, gpu_uuid, namespace, pod, container, samples FROM ({sql}) ORDER BY 1, 2")
    return {(h.astimezone(UTC).hour, g): (ns, pod, c, n) for h, g, ns, pod, c, n in rows.fetchall()}


@pytest.mark.parametrize("deduplicate", [False, True])
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
