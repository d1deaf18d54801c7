"""The metrics store's rollup SQL: minute samples to ``gpu_metrics_hourly`` and ``gpu_workloads_hourly`` rows.

Split from :mod:`ingest.metrics.metrics_store` (which plans what to roll up and re-exports these names):
the per-sample figures, the hour as a number since the epoch, the hourly and workload grouping, and the
statements that attribute the rolled-up days.
"""

from __future__ import annotations

import duckdb

from gpufinops.ingest.metrics.metrics_attribution import attributed_sql, gpu_model_day_rows, gpu_model_rows
from gpufinops.ingest.metrics.rollup_shape import SHAPE_COLUMNS, shape_sql

_SAMPLE_EXPRS = {  # per-sample figure -> expression over SAMPLE_SCHEMA columns
    "util": "util",
    "sm_active": "coalesce(sm_active, gr_active)",
    "tensor_active": "tensor_active",
    "mem_used": "mem_used_mib",
    "mem_total": "coalesce(mem_total_mib, mem_used_mib + mem_free_mib + coalesce(mem_reserved_mib, 0))",
    "power_w": "power_w",
    "engine": "coalesce(gr_active, sm_active)",
    **{f: f for f in ("sm_occupancy", "fp16_active", "fp32_active", "fp64_active", "dram_active")},
    **{f: f for f in ("pcie_tx_bps", "pcie_rx_bps", "nvlink_tx_bps", "nvlink_rx_bps")},
}
# the profiling fields' hourly means: gpu_metrics_hourly column -> per-sample figure (metrics_schema.PROFILING_COLUMNS)
_PROFILING_MEANS = {
    "gr_active_mean": "engine",
    "sm_occupancy_mean": "sm_occupancy",
    "fp16_active_mean": "fp16_active",
    "fp32_active_mean": "fp32_active",
    "fp64_active_mean": "fp64_active",
    "dram_active_mean": "dram_active",
    "pcie_tx_mean_bps": "pcie_tx_bps",
    "pcie_rx_mean_bps": "pcie_rx_bps",
    "nvlink_tx_mean_bps": "nvlink_tx_bps",
    "nvlink_rx_mean_bps": "nvlink_rx_bps",
}
_PROFILING_P95 = {"gr_active_p95": "engine", "dram_active_p95": "dram_active"}
_ATTRS = ("name", "host", "resource_hint", "provider_id")  # the hour's largest value
_LABELS = ("namespace", "pod", "container")  # the value most of the hour's samples carry
# Means are rounded to 1e-9: a parallel float sum's last bits depend on the order rows arrive in,
# and a re-run must reproduce the stored rows exactly.
MEAN = "round({}, 9)"
HOUR_US = 3_600_000_000


def hour_number_sql(ts: str) -> str:
    """SQL: the UTC hour of a timestamp as whole hours since the epoch (floored, so before 1970 too).

    Integer arithmetic: ``date_trunc('hour', ts)`` of a TIMESTAMPTZ goes through the time-zone calendar
    for every sample and cost more than the rest of the hourly rollup's grouping together; the rollup
    groups by this number and turns each group's into its hour (``hour_sql``) once."""
    return f"(epoch_us({ts}) // {HOUR_US} - CAST(epoch_us({ts}) % {HOUR_US} < 0 AS BIGINT))"


def hour_sql(number: str) -> str:
    """SQL: the TIMESTAMPTZ of an hour number (``hour_number_sql``): ``date_trunc('hour', ts)`` in UTC."""
    return f"make_timestamptz({number} * {HOUR_US})"


def _relation_sql(samples: str, deduplicate: bool) -> tuple[str, str, dict[str, str]]:
    """(CTE prefix, relation, figure -> column) of the samples an hourly rollup groups."""
    if deduplicate:
        figures = ", ".join(f"max({expr}) AS {name}" for name, expr in _SAMPLE_EXPRS.items())
        attrs = ", ".join(f"max({a}) AS {a}" for a in _ATTRS + _LABELS)
        source = (
            f"per_ts AS (SELECT gpu_uuid, mig_instance, ts, {attrs}, {figures} FROM {samples} "
            f"WHERE gpu_uuid IS NOT NULL AND ts IS NOT NULL GROUP BY gpu_uuid, mig_instance, ts),"
        )
        return source, "per_ts", {name: name for name in _SAMPLE_EXPRS}
    return "", f"(SELECT * FROM {samples} WHERE gpu_uuid IS NOT NULL AND ts IS NOT NULL)", dict(_SAMPLE_EXPRS)


def hourly_sql(samples: str, *, deduplicate: bool = True, workloads: str | None = None) -> str:
    """CTEs ending in ``hourly``: one row per (hour, gpu_uuid, mig_instance) from a SAMPLE_SCHEMA relation.

    With ``deduplicate``, a sample stored twice (same GPU, slice and time) counts once; without, the
    caller guarantees the samples are unique (one file per day, unique by construction), which
    saves a grouping over every sample. mem_total per sample is ``mem_total_mib`` when reported,
    else used + free + reserved (DCGM). sm_active is DCGM_FI_PROF_SM_ACTIVE, or
    DCGM_FI_PROF_GR_ENGINE_ACTIVE when SM_ACTIVE is not exported. Attributes (name, host, labels)
    take the hour's largest value (constant for a GPU in practice); the namespace, pod and container
    are the ones most of the hour's samples carry: the hour's single value, found in this pass, or for
    the hours ``_mixed`` marks (a label changed) ``mixed_labels_sql``'s (a ``mode()`` over every sample
    would be the costliest part of the rollup, for the few hours a pod changed in).

    ``workloads`` (unique samples only): the hour's workload rows (``workloads.rollup_table``, one per
    labelled namespace / pod / container of the same samples), from which the labels' largest and
    smallest values come instead of from every sample: the same values (a sample without labels
    has none to count), found among a few rows per GPU-hour instead of 60."""
    source, relation, col = _relation_sql(samples, deduplicate)
    mixed = " OR ".join(f"min({a}) IS DISTINCT FROM max({a})" for a in _LABELS)
    labels = f"{', '.join(f'max({a}) AS {a}' for a in _LABELS)}, ({mixed}) AS _mixed"
    figures = f"""{MEAN.format(f"avg({col['util']})")} AS util_mean, quantile_cont({col["util"]}, 0.95) AS util_p95,
         max({col["util"]}) AS util_max, max({col["mem_used"]}) AS mem_used_max_mib, max({col["mem_total"]}) AS mem_total_mib,
         {MEAN.format(f"avg({col['sm_active']})")} AS sm_active_mean,
         {MEAN.format(f"avg({col['tensor_active']})")} AS tensor_active_mean,
         {MEAN.format(f"avg({col['power_w']})")} AS power_mean_w, count(*) AS samples,
         {", ".join(f"{MEAN.format(f'avg({col[f]})')} AS {c}" for c, f in _PROFILING_MEANS.items())},
         {", ".join(f"quantile_cont({col[f]}, 0.95) AS {c}" for c, f in _PROFILING_P95.items())}"""
    grouped = (
        f"""{hour_sql("_hour_n")} AS hour, gpu_uuid, mig_instance, {", ".join(f"max({a}) AS {a}" for a in _ATTRS)}"""
    )
    scan = (
        f"FROM (SELECT *, {hour_number_sql('ts')} AS _hour_n FROM {relation}) GROUP BY _hour_n, gpu_uuid, mig_instance"
    )
    if workloads is None or deduplicate:
        return f"""{source}
hourly AS (
  SELECT {grouped},
         {labels},
         {figures}
  {scan}
)"""
    return f"""{source}
grouped AS (
  SELECT {grouped},
         {figures}
  {scan}
),
labels AS (SELECT hour, gpu_uuid, mig_instance, {labels} FROM {workloads} GROUP BY hour, gpu_uuid, mig_instance),
hourly AS (
  SELECT g.hour, g.gpu_uuid, g.mig_instance, {", ".join(f"g.{a}" for a in _ATTRS)}, {", ".join(f"l.{a}" for a in _LABELS)},
         coalesce(l._mixed, false) AS _mixed, g.* EXCLUDE (hour, gpu_uuid, mig_instance, {", ".join(_ATTRS)})
  FROM grouped g LEFT JOIN labels l
       ON l.hour = g.hour AND l.gpu_uuid = g.gpu_uuid AND l.mig_instance IS NOT DISTINCT FROM g.mig_instance
)"""


def mixed_labels_sql(samples: str, hourly: str, *, deduplicate: bool = True) -> str:
    """SELECT (hour, gpu_uuid, mig_instance, namespace, pod, container): the labels most samples carry,
    for the rows of ``hourly`` marked ``_mixed``, from their hours' samples only."""
    source, relation, _ = _relation_sql(samples, deduplicate)
    return f"""WITH {source}
mixed AS (SELECT hour, gpu_uuid, mig_instance FROM {hourly} WHERE _mixed),
hours AS (SELECT DISTINCT hour FROM mixed)
SELECT s.hour, s.gpu_uuid, s.mig_instance, {", ".join(f"mode(s.{a}) AS {a}" for a in _LABELS)}
FROM (SELECT {hour_sql(hour_number_sql("ts"))} AS hour, gpu_uuid, mig_instance, {", ".join(_LABELS)} FROM {relation}
      WHERE {hour_number_sql("ts")} IN (SELECT epoch_us(hour) // {HOUR_US} FROM hours)) s
JOIN mixed m ON m.hour = s.hour AND m.gpu_uuid = s.gpu_uuid AND m.mig_instance IS NOT DISTINCT FROM s.mig_instance
GROUP BY 1, 2, 3"""


def hourly_table(
    con: duckdb.DuckDBPyConnection,
    samples: str,
    *,
    run_id: str,
    deduplicate: bool = True,
    part: str = "",
    workloads: str | None = None,
) -> str:
    """The hourly rollup of a relation of samples, computed now into a temporary table (the samples are
    scanned once, and again only for the hours a workload label changed in); returns its name.
    ``workloads``: the same samples' workload table, whose rows give the labels (``hourly_sql``)."""
    table = f"_gpufinops_hourly_{run_id}{part}"  # ``part``: one temporary table per day of a large rollup
    con.execute("SET enable_progress_bar = false")  # a long rollup must not draw on a job's terminal
    hourly = hourly_sql(samples, deduplicate=deduplicate, workloads=workloads).strip()
    con.execute(f"CREATE OR REPLACE TEMP TABLE {table} AS WITH {hourly} SELECT * FROM hourly")
    _add_shape(con, table, samples)
    if con.execute(f"SELECT count(*) FROM (SELECT 1 FROM {table} WHERE _mixed LIMIT 1)").fetchall()[0][0]:
        labels = ", ".join(f"{a} = x.{a}" for a in _LABELS)
        con.execute(
            f"UPDATE {table} AS t SET {labels} FROM ({mixed_labels_sql(samples, table, deduplicate=deduplicate)}) x "
            f"WHERE t._mixed AND t.hour = x.hour AND t.gpu_uuid = x.gpu_uuid "
            f"AND t.mig_instance IS NOT DISTINCT FROM x.mig_instance"
        )
    return table


def _add_shape(con: duckdb.DuckDBPyConnection, table: str, samples: str) -> None:
    """The engine's minute-level shape of each hour (``rollup_shape``) joined onto the hourly table."""
    shape = shape_sql(samples, hour_number_sql("ts"))
    columns = ", ".join(f"s.{c}" for c in SHAPE_COLUMNS)
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE {table} AS SELECT h.*, {columns} FROM {table} h LEFT JOIN ({shape}) s "
        f"ON s._hour_n = epoch_us(h.hour) // {HOUR_US} AND s.gpu_uuid = h.gpu_uuid "
        f"AND s.mig_instance IS NOT DISTINCT FROM h.mig_instance"
    )


def merge_tables(con: duckdb.DuckDBPyConnection, tables: list[str]) -> str:
    """``hourly_table``'s tables of one day's parts as one (the first, the others' rows appended)."""
    for table in tables[1:]:
        con.execute(f"INSERT INTO {tables[0]} SELECT * FROM {table}; DROP TABLE {table}")
    return tables[0]


def attributed_days_sql(con: duckdb.DuckDBPyConnection, table: str, *, source: str, run_id: str) -> str:
    """The gpu_metrics_hourly rows of one ``hourly_table`` holding several days, as one SELECT: each day's
    GPU models from its own samples' memory, as the day's own table gives them (``attributed_tables_sql``)."""
    models = gpu_model_day_rows(con, table)
    return attributed_sql(
        f"hourly AS (SELECT * FROM {table})", source=source, run_id=run_id, models=[], day_models=models
    )


def attributed_tables_sql(con: duckdb.DuckDBPyConnection, tables: list[str], *, source: str, run_id: str) -> str:
    """The gpu_metrics_hourly rows (with their attribution hints) of ``hourly_table``'s tables, as one SELECT."""
    parts = [
        attributed_sql(f"hourly AS (SELECT * FROM {t})", source=source, run_id=run_id, models=gpu_model_rows(con, t))
        for t in tables  # each day's GPU models from its own samples' memory, as one day's batch had them
    ]
    if len(parts) == 1:
        return parts[0]
    table = f"_gpufinops_hourly_{run_id}_all"  # the load's domain checks over a union of days cost 4× a table's
    con.execute(f"CREATE OR REPLACE TEMP TABLE {table} AS " + " UNION ALL ".join(f"SELECT * FROM ({q})" for q in parts))
    con.execute("".join(f"DROP TABLE {day_table};" for day_table in tables))
    return f"SELECT * FROM {table}"


def rollup_sql(
    con: duckdb.DuckDBPyConnection, samples: str, *, source: str, run_id: str, deduplicate: bool = True, part: str = ""
) -> str:
    """gpu_metrics_hourly rows of a relation of samples: rolled up now (``hourly_table``), attributed by the load."""
    table = hourly_table(con, samples, run_id=run_id, deduplicate=deduplicate, part=part)
    return attributed_tables_sql(con, [table], source=source, run_id=run_id)
