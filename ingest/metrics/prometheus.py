"""``prometheus``: GPU metrics from a Prometheus server's HTTP API, rolled up hourly by Prometheus.

The hourly aggregation is pushed down: one ``/api/v1/query_range`` per figure with an hourly step
(``avg_over_time``, ``quantile_over_time(0.95, …)``, ``max_over_time``, ``min_over_time``,
``count_over_time`` over exactly one hour: each evaluation at ``hour end − 1 ms`` covers the samples
in ``[hour, hour + 1 h)``), so a large fleet comes home as hourly points, not minutes. Two
dialects are read, both when present: DCGM exporter (``DCGM_FI_*``, with MIG, Kubernetes and
resource labels as for ``dcgm_exporter``) and nvidia_gpu_exporter (``nvidia_smi_*``: utilisation
ratio × 100, memory bytes → MiB, the GPU name from ``nvidia_smi_gpu_info``).

The queries and their client are ``prometheus_api.py``. Incremental by time: a run covers
``[cursor − lookback_hours, last complete hour)``; the first run (or ``--full-refresh``) starts
``backfill_days`` back; ``--since``/``--until`` override both. Each
hour of the window is a slice replaced whole. A run whose hours come back identical to what is
stored is recorded as skipped. Series of one GPU-hour (a pod change splits them) are combined
weighted by their sample counts; their p95 is the largest of theirs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from gpufinops.ingest.core import registry, validate
from gpufinops.ingest.core.registry import Batch, FetchResult, IngestContext
from gpufinops.ingest.core.spec import ExporterOptions
from gpufinops.ingest.core.validate_metrics import rejects_table
from gpufinops.ingest.metrics import doctor, hourly_source, metrics_attribution, metrics_store, workloads
from gpufinops.ingest.metrics.prometheus_api import PrometheusClient, fetch_partials
from gpufinops.ingest.metrics.scrape import display_url
from gpufinops.warehouse.metrics_schema import GPU_METRICS_HOURLY, GPU_WORKLOADS_HOURLY

log = logging.getLogger(__name__)

# What the source says (the attribution derived from it is re-resolved by every load: not compared).
COMPARED = (
    "hour",
    "gpu_uuid",
    "gpu_model",
    "mig_instance",
    "host",
    "resource_hint",
    "provider_id",
    "namespace",
    "pod",
    "container",
    "util_mean",
    "util_p95",
    "util_max",
    "mem_used_max_mib",
    "mem_total_mib",
    "sm_active_mean",
    "tensor_active_mean",
    "power_mean_w",
    "samples",
)
WORKLOADS_COMPARED = tuple(c for c in GPU_WORKLOADS_HOURLY.names if c not in ("source", "ingest_run_id"))


# gpu_metrics_hourly's profiling columns from the partials (samples-weighted means; p95s: the largest series';
# the minute-level shape is NULL: PromQL's hourly push-down does not keep it, so it is not measured here)
_PROFILING = {
    "gr_active_mean": "coalesce(gr_mean, sm_mean)",
    "sm_occupancy_mean": "occupancy_mean",
    "fp16_active_mean": "fp16_mean",
    "fp32_active_mean": "fp32_mean",
    "fp64_active_mean": "fp64_mean",
    "dram_active_mean": "dram_mean",
    "pcie_tx_mean_bps": "pcie_tx_mean",
    "pcie_rx_mean_bps": "pcie_rx_mean",
    "nvlink_tx_mean_bps": "nvlink_tx_mean",
    "nvlink_rx_mean_bps": "nvlink_rx_mean",
}
_PROFILING_MEANS = ",\n         ".join(
    [
        *(
            f"round(sum({f} * samples) / nullif(sum(samples) FILTER (WHERE {f} IS NOT NULL), 0), 9) AS {c}"
            for c, f in _PROFILING.items()
        ),
        "max(gr_p95) AS gr_active_p95",
        "max(dram_p95) AS dram_active_p95",
        *(f"CAST(NULL AS DOUBLE) AS {c}" for c in ("pcie_rx_idle_bps", "held_idle_minutes", "idle_streak_minutes")),
        "CAST(NULL AS INTEGER) AS idle_dips",
    ]
)

HOURLY_FROM_PARTIALS = f"""
hourly AS (
  SELECT CAST(hour AS TIMESTAMPTZ) AS hour, gpu_uuid, mig_instance, max(name) AS name, max(host) AS host,
         max(resource_hint) AS resource_hint, max(provider_id) AS provider_id,
         arg_max(namespace, coalesce(samples, 0)) AS namespace, arg_max(pod, coalesce(samples, 0)) AS pod,
         arg_max(container, coalesce(samples, 0)) AS container,
         round(sum(util_mean * samples) / nullif(sum(samples) FILTER (WHERE util_mean IS NOT NULL), 0), 9) AS util_mean,
         max(util_p95) AS util_p95, max(util_max) AS util_max, max(mem_used_max) AS mem_used_max_mib,
         max(coalesce(mem_total_max, mem_used_max + mem_free_min + coalesce(mem_reserved_max, 0))) AS mem_total_mib,
         round(sum(coalesce(sm_mean, gr_mean) * samples) / nullif(sum(samples) FILTER (WHERE coalesce(sm_mean, gr_mean) IS NOT NULL), 0), 9) AS sm_active_mean,
         round(sum(tensor_mean * samples) / nullif(sum(samples) FILTER (WHERE tensor_mean IS NOT NULL), 0), 9) AS tensor_active_mean,
         round(sum(power_mean * samples) / nullif(sum(samples) FILTER (WHERE power_mean IS NOT NULL), 0), 9) AS power_mean_w,
         CAST(sum(samples) AS INTEGER) AS samples,
         {_PROFILING_MEANS}
  FROM _prometheus_partials GROUP BY 1, 2, 3
)"""


def _hour(value: datetime) -> datetime:
    return value.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


@dataclass(frozen=True, kw_only=True)
class PrometheusOptions(hourly_source.PrometheusQueryOptions, ExporterOptions):
    """A Prometheus server's GPU metrics: the exporter options and the query's."""


class Prometheus:
    meta = registry.IngestorMeta(
        **hourly_source.QUERIED_BY_THE_HOUR,
        name="prometheus",
        target_table="gpu_metrics_hourly",
        key=metrics_store.GPU_HOURLY_KEY,
        default_schedule="7 * * * *",
        options=PrometheusOptions,
        description="a Prometheus server's `/api/v1/query_range`, hourly aggregation pushed down; DCGM "
        "(`DCGM_FI_*`) and nvidia_gpu_exporter (`nvidia_smi_*`) metrics",
        provider=None,
        extra=None,
        transport=registry.Transport(client="http", endpoint="url", paged=False, unless=None),
        freshness=registry.Freshness(kind="metrics", lag_hours=2.0),
        doctor=doctor.prometheus,
        init=("prometheus_url",),
    )

    def fetch(self, ctx: IngestContext) -> FetchResult:
        options: PrometheusOptions = ctx.options
        resource_map, namespace_teams = dict(options.resource_map), dict(options.namespace_teams)
        start, end = ctx.window.whole_hours(datetime.now(UTC), timedelta(days=options.backfill_days))
        state = {"cursor": end.isoformat()}
        if end <= start:
            return hourly_source.no_complete_hour(ctx, state, [])
        client = PrometheusClient(options.url, options.timeout_s, options.retries, options.bounds())
        skip_rows = validate.on_invalid(ctx) == validate.SKIP_ROWS
        rejects: list[dict] = []
        partials = fetch_partials(client, start, end, options, rejects if skip_rows else None)
        log.info("%s: %d series-hours from %s to %s", ctx.source, partials.num_rows, start, end)
        con = ctx.con
        con.register("_prometheus_partials", partials)
        sql = metrics_attribution.attributed_sql(
            HOURLY_FROM_PARTIALS,
            source=ctx.source,
            run_id=ctx.run_id,
            models=metrics_attribution.gpu_model_rows(
                con,
                "(SELECT name, coalesce(mem_total_max, mem_used_max + mem_free_min + coalesce(mem_reserved_max, 0)) AS mem_total_mib FROM _prometheus_partials)",
            ),
        )
        new = con.sql(sql).to_arrow_table()
        running = (
            con.sql(workloads.partials_sql("_prometheus_partials", source=ctx.source, run_id=ctx.run_id))
            .to_arrow_table()
            .cast(GPU_WORKLOADS_HOURLY)
        )
        con.unregister("_prometheus_partials")
        hours = [
            (start + timedelta(hours=h)).strftime(metrics_store.HOUR_FORMAT)
            for h in range(int((end - start) / timedelta(hours=1)))
        ]
        watermark = end.isoformat()
        rules = metrics_attribution.rules_batches(ctx, resource_map, namespace_teams)
        refused = [validate.rejects_batch(rejects_table(ctx, rejects), [r["file"] for r in rejects])] if rejects else []
        if (
            not ctx.window.full_refresh
            and not refused
            and hourly_source.hours_unchanged(con, ctx.source, new, (start, end), "gpu_metrics_hourly", COMPARED)
            and hourly_source.hours_unchanged(
                con, ctx.source, running, (start, end), "gpu_workloads_hourly", WORKLOADS_COMPARED
            )
        ):
            return FetchResult(rules, state, watermark=watermark, skipped_reason="no new or changed hours")
        where = f"query_range of {display_url(options.url)}"
        return FetchResult(
            rules
            + [
                Batch(table="gpu_metrics_hourly", data=new.cast(GPU_METRICS_HOURLY), slices=hours, context=where),
                Batch(table="gpu_workloads_hourly", data=running, slices=hours, context=where),
            ]
            + refused,
            state,
            watermark=watermark,
        )


INGESTORS = [Prometheus]
