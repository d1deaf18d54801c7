"""What the busy-waste kinds read (``idle_held``, ``stalled_job``, ``input_bound``, ``no_tensor_cores``,
``memory_bound_inference``; rules in models/busy_rules.py, findings in models/busy_findings.py): every
pod-GPU-hour of ``gpu_metrics_hourly`` with DCGM's profiling columns, the cost allocation charged the pod
for it (``gpu_allocation_hourly``: the bill's cost per GPU-hour, NULL where no bill allocates it yet), the
resource's billing facts, the source type that measured it, the GPU model's tensor-core speed-up on paper
(``warehouse/data/gpu_specs.csv``), whether the pod serves tokens (``serving_metrics_hourly``) and the
resource's quantization finding, if any (the stored findings).
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import polars as pl

from gpufinops.models import run_reads
from gpufinops.warehouse.metrics_schema import PROFILING_COLUMNS

# The profiling columns the warehouse declares for gpu_metrics_hourly (v19), read as they are declared
PROFILING = tuple(name for name, _ in PROFILING_COLUMNS)
POD = ("resource_id", "namespace", "pod")
LOOKBACK_DAYS = 30

_HOURS_SQL = """
WITH alloc AS (
    SELECT hour, resource_id, gpu_uuid, mig_instance, namespace, pod, sum(cost_usd) AS cost_usd,
           any_value(basis) AS basis
    FROM gpu_allocation_hourly WHERE basis <> 'unallocated' AND pod IS NOT NULL GROUP BY ALL),
runs AS (SELECT source, arg_max(source_type, started_at) AS source_type FROM ingest_runs GROUP BY source),
resources AS (
    SELECT c."ResourceId" AS resource_id, any_value(c."ProviderName") AS provider,
           any_value(c."x_InstanceType") AS instance_type, mode(c."PricingCategory") AS pricing_category
    FROM cost_line_items c WHERE c."ChargeCategory" = 'Usage'
      AND c."ResourceId" IN (SELECT DISTINCT resource_id FROM gpu_metrics_hourly WHERE resource_id IS NOT NULL)
    GROUP BY 1)
SELECT g.hour, g.resource_id, g.gpu_uuid, g.mig_instance, g.gpu_model, g.namespace, g.pod, g.container,
       g.team, g.source, r.source_type, g.util_mean, g.mem_used_max_mib, g.mem_total_mib,
       coalesce(g.sm_active_mean, g.gr_active_mean) AS sm_active_mean, g.tensor_active_mean,
       {profiling}, g.samples, a.cost_usd, a.basis,
       res.provider, res.instance_type, res.pricing_category
FROM gpu_metrics_hourly g
LEFT JOIN alloc a ON a.hour = g.hour AND a.resource_id = g.resource_id AND a.gpu_uuid = g.gpu_uuid
     AND a.mig_instance IS NOT DISTINCT FROM g.mig_instance AND a.namespace IS NOT DISTINCT FROM g.namespace
     AND a.pod = g.pod
LEFT JOIN runs r ON r.source = g.source
LEFT JOIN resources res ON res.resource_id = g.resource_id
WHERE g.resource_id IS NOT NULL
  AND g.hour > (SELECT max(hour) FROM gpu_metrics_hourly) - INTERVAL {hours} HOUR
ORDER BY g.resource_id, g.namespace, g.pod, g.gpu_uuid, g.mig_instance, g.hour"""


@dataclass(frozen=True)
class BusyInputs:
    """The pod-GPU-hours (``_HOURS_SQL``), the GPU models' tensor-core speed-up on paper, the serving pods
    and the resources' open quantization findings (resource_id -> finding id)."""

    hours: pl.DataFrame
    tensor_ratio: dict[str, float]
    serving_pods: frozenset[tuple[str | None, str]]
    quantization: dict[str, str]


def load(con: duckdb.DuckDBPyConnection, settings: None = None) -> BusyInputs:
    """Read once per run (models/run_reads.py) and shared by the five kinds."""
    return run_reads.shared(con, "busy_inputs", None, lambda: _read(con))


def read_hours(con: duckdb.DuckDBPyConnection, hours: int) -> pl.DataFrame:
    """The pod-GPU-hours of the last ``hours`` hours before the newest measured one (``_HOURS_SQL``)."""
    sql = _HOURS_SQL.format(hours=int(hours), profiling=", ".join(f"g.{c}" for c in PROFILING))
    frame = pl.from_arrow(con.sql(sql).to_arrow_table())
    assert isinstance(frame, pl.DataFrame)
    return frame


def _read(con: duckdb.DuckDBPyConnection) -> BusyInputs:
    hours = read_hours(con, LOOKBACK_DAYS * 24)
    specs = "SELECT gpu_model, fp16_tflops, fp32_tflops FROM gpu_specs WHERE fp32_tflops > 0 AND fp16_tflops > 0"
    ratio = {model: float(fp16) / float(fp32) for model, fp16, fp32 in con.execute(specs).fetchall()}
    pods = "SELECT DISTINCT namespace, pod FROM serving_metrics_hourly WHERE pod IS NOT NULL"
    serving = frozenset(con.execute(pods).fetchall())
    quantization = dict(
        con.execute(
            "SELECT resource_id, min(id) FROM recommendations WHERE kind = 'quantization' "
            "AND resource_id IS NOT NULL GROUP BY 1"
        ).fetchall()
    )
    return BusyInputs(hours, ratio, serving, quantization)
