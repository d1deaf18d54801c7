"""What ran on each GPU in each hour: ``gpu_workloads_hourly`` rows, written with the hourly rollup.

The shared-GPU chargeback (``derived/allocation.py``) divides a GPU-hour's cost among its
workloads by *measured presence*: how many of the hour's sample times each workload was seen on
the GPU (or MIG slice). Every metrics ingestor that knows workloads writes one row per (hour,
GPU, slice, workload) in the same load, over the same slices, as its ``gpu_metrics_hourly`` rows:

* ``dcgm_exporter`` (from the sample store): a workload is a Kubernetes ``namespace``/``pod``/
  ``container`` the exporter labelled the series with. ``samples`` counts the distinct sample
  times it was seen, ``occupied_samples`` the distinct times any workload was on the GPU; when
  several pods are on one GPU at one time (dcgm-exporter's ``--kubernetes-virtual-gpus`` copies
  every series per sharing pod, with a ``vgpu`` label) the GPU is time-sliced (``sharing``).
* ``prometheus`` (from the pushed-down hourly figures per series): the same labels; Prometheus
  returns sample counts per series, not distinct times, so ``occupied_samples`` is unknown (NULL)
  and sharing is known only from the ``vgpu`` label.
* ``nvidia_smi_csv`` (from ``--query-compute-apps`` logs): a workload is a process (``pid``,
  ``process``); several processes at one time share the GPU by time-slicing, and the MPS control
  server (``nvidia-cuda-mps-server``) among them makes it ``mps`` (the server itself is not a
  workload). nvidia-smi reports no per-process utilisation.

Per-workload utilisation and SM activity are the workload's own series (dcgm-exporter exports
per-pod figures for shared GPUs when it can measure them; otherwise they repeat the device's).
"""

from __future__ import annotations

import duckdb

from gpufinops.ingest.core.files import sql_literal
from gpufinops.ingest.metrics.rollup_sql import hour_number_sql, hour_sql

MPS_SERVER = "%nvidia-cuda-mps-server%"
_LABELLED = "(namespace IS NOT NULL OR pod IS NOT NULL OR container IS NOT NULL)"
_GPU_HOUR = "PARTITION BY hour, gpu_uuid, mig_instance"
_P_GPU_HOUR = "PARTITION BY p.hour, p.gpu_uuid, p.mig_instance"


def _select(source: str, run_id: str) -> str:
    """The table's column list over a relation ``w`` with the workload figures."""
    return f"""
SELECT hour, gpu_uuid, mig_instance, host, namespace, pod, container, CAST(pid AS INTEGER) AS pid, process,
       CAST(samples AS INTEGER) AS samples, CAST(occupied_samples AS INTEGER) AS occupied_samples, sharing,
       util_mean, sm_active_mean, mem_used_max_mib, {sql_literal(source)} AS source, {sql_literal(run_id)} AS ingest_run_id
FROM w"""


def samples_sql(samples: str, *, source: str, run_id: str, deduplicate: bool = True) -> str:
    """gpu_workloads_hourly rows from a relation of samples (metrics_store.SAMPLE_SCHEMA).

    With ``deduplicate`` a sample stored twice (same time, GPU, slice and workload) counts once.
    """
    columns = (
        "ts, gpu_uuid, mig_instance, namespace, pod, container, host, vgpu, util, "
        "coalesce(sm_active, gr_active) AS sm, mem_used_mib"
    )
    labelled = f"SELECT {columns} FROM {samples} WHERE gpu_uuid IS NOT NULL AND ts IS NOT NULL AND {_LABELLED}"
    if deduplicate:
        labelled = (
            f"SELECT ts, gpu_uuid, mig_instance, namespace, pod, container, max(host) AS host, max(vgpu) AS vgpu, "
            f"max(util) AS util, max(sm) AS sm, max(mem_used_mib) AS mem_used_mib FROM ({labelled}) "
            f"GROUP BY ALL"
        )
    # Unique samples (no deduplication needed) are one row per GPU and time, so the times any workload
    # was on a GPU are the sum of its workloads' samples: no second grouping of the samples.
    occupied = (
        f"SELECT {hour_sql('hour_n')} AS hour, gpu_uuid, mig_instance, count(DISTINCT ts) AS occupied_samples "
        "FROM labelled GROUP BY hour_n, gpu_uuid, mig_instance"
        if deduplicate
        else "SELECT hour, gpu_uuid, mig_instance, sum(samples) AS occupied_samples FROM per GROUP BY 1, 2, 3"
    )
    # The hour is grouped as its number (integer arithmetic, not date_trunc's calendar per sample) and
    # turned into its TIMESTAMPTZ once per group.
    return f"""
WITH labelled AS (SELECT *, {hour_number_sql("ts")} AS hour_n FROM ({labelled})),
per AS (
  SELECT {hour_sql("hour_n")} AS hour, gpu_uuid, mig_instance, namespace, pod, container, max(host) AS host,
         count(*) AS samples, round(avg(util), 9) AS util_mean, round(avg(sm), 9) AS sm_active_mean,
         max(mem_used_mib) AS mem_used_max_mib, bool_or(vgpu IS NOT NULL) AS vgpu
  FROM labelled GROUP BY hour_n, gpu_uuid, mig_instance, namespace, pod, container),
occupied AS ({occupied}),
w AS (
  SELECT p.*, NULL AS pid, CAST(NULL AS VARCHAR) AS process, o.occupied_samples,
         CASE WHEN bool_or(p.vgpu) OVER ({_P_GPU_HOUR}) OR sum(p.samples) OVER ({_P_GPU_HOUR}) > o.occupied_samples
              THEN 'timeslice' END AS sharing
  FROM per p JOIN occupied o ON o.hour = p.hour AND o.gpu_uuid = p.gpu_uuid
       AND o.mig_instance IS NOT DISTINCT FROM p.mig_instance)
{_select(source, run_id)}"""


def rollup(
    con: duckdb.DuckDBPyConnection, samples: str, *, source: str, run_id: str, deduplicate: bool = True, part: str = ""
) -> str:
    """The workload rows, computed now into a temporary table (the samples are read outside the load's
    transaction); returns the SELECT the load inserts."""
    return (
        f"SELECT * FROM {rollup_table(con, samples, source=source, run_id=run_id, deduplicate=deduplicate, part=part)}"
    )


def rollup_table(
    con: duckdb.DuckDBPyConnection, samples: str, *, source: str, run_id: str, deduplicate: bool = True, part: str = ""
) -> str:
    """``rollup``'s temporary table; returns its name."""
    table = f"_gpufinops_workloads_{run_id}{part}"
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE {table} AS "
        f"{samples_sql(samples, source=source, run_id=run_id, deduplicate=deduplicate)}"
    )
    return table


def partials_sql(partials: str, *, source: str, run_id: str) -> str:
    """gpu_workloads_hourly rows from the prometheus ingestor's per-series hourly figures."""
    return f"""
WITH per AS (
  SELECT CAST(hour AS TIMESTAMPTZ) AS hour, gpu_uuid, mig_instance, namespace, pod, container, max(host) AS host,
         sum(samples) AS samples,
         round(sum(util_mean * samples) / nullif(sum(samples) FILTER (WHERE util_mean IS NOT NULL), 0), 9) AS util_mean,
         round(sum(coalesce(sm_mean, gr_mean) * samples)
               / nullif(sum(samples) FILTER (WHERE coalesce(sm_mean, gr_mean) IS NOT NULL), 0), 9) AS sm_active_mean,
         max(mem_used_max) AS mem_used_max_mib, bool_or(vgpu IS NOT NULL) AS vgpu
  FROM {partials} WHERE gpu_uuid IS NOT NULL AND {_LABELLED} AND samples > 0 GROUP BY 1, 2, 3, 4, 5, 6),
w AS (
  SELECT *, NULL AS pid, CAST(NULL AS VARCHAR) AS process, NULL AS occupied_samples,
         CASE WHEN bool_or(vgpu) OVER ({_GPU_HOUR}) THEN 'timeslice' END AS sharing
  FROM per)
{_select(source, run_id)}"""


def apps_sql(samples: str, *, source: str, run_id: str) -> str:
    """gpu_workloads_hourly rows from nvidia-smi compute-apps samples (ts, host, gpu_uuid, pid,
    process_name, mem_used_mib), a sample logged twice counting once."""
    return f"""
WITH per_ts AS (
  SELECT ts, host, gpu_uuid, pid, process_name, max(mem_used_mib) AS mem_used_mib FROM {samples}
  WHERE gpu_uuid IS NOT NULL AND ts IS NOT NULL GROUP BY ALL),
procs AS (SELECT * FROM per_ts WHERE process_name IS NULL OR process_name NOT ILIKE {sql_literal(MPS_SERVER)}),
mps AS (SELECT DISTINCT date_trunc('hour', ts) AS hour, gpu_uuid FROM per_ts
        WHERE process_name ILIKE {sql_literal(MPS_SERVER)}),
per AS (
  SELECT date_trunc('hour', ts) AS hour, gpu_uuid, CAST(NULL AS VARCHAR) AS mig_instance, max(host) AS host,
         CAST(NULL AS VARCHAR) AS namespace, CAST(NULL AS VARCHAR) AS pod, CAST(NULL AS VARCHAR) AS container,
         pid, process_name AS process, count(*) AS samples, CAST(NULL AS DOUBLE) AS util_mean,
         CAST(NULL AS DOUBLE) AS sm_active_mean, max(mem_used_mib) AS mem_used_max_mib
  FROM procs GROUP BY date_trunc('hour', ts), gpu_uuid, pid, process_name),
occupied AS (
  SELECT date_trunc('hour', ts) AS hour, gpu_uuid, count(DISTINCT ts) AS occupied_samples FROM procs GROUP BY 1, 2),
w AS (
  SELECT p.*, o.occupied_samples,
         CASE WHEN m.gpu_uuid IS NOT NULL THEN 'mps'
              WHEN sum(p.samples) OVER (PARTITION BY p.hour, p.gpu_uuid) > o.occupied_samples THEN 'timeslice' END
             AS sharing
  FROM per p JOIN occupied o USING (hour, gpu_uuid) LEFT JOIN mps m USING (hour, gpu_uuid))
{_select(source, run_id)}"""
