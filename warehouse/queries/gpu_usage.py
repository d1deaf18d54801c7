"""The GPU fleet: billed GPU resource-hours, their utilisation and attribution, idle cost, capacity and the inventory."""

from __future__ import annotations

from datetime import datetime

import duckdb
import polars as pl

from gpufinops.warehouse import reference
from gpufinops.warehouse.queries.fragments import GPU_RESOURCE_USAGE, filters, frame, resource_hour_columns


def gpu_resource_hours(
    con: duckdb.DuckDBPyConnection,
    *,
    team: str | list[str] | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
) -> pl.DataFrame:
    """One row per billed GPU resource-hour with its cost and the utilisation measured in it.

    Cost is the resource's GPU usage lines in that hour (EffectiveCost, amortised). Utilisation
    columns are NULL where no metrics arrived for the hour: a gap is unknown, not idle.
    """
    where, params = filters(team, start, end)
    util_where, util_params = filters(None, start, end, time_col="hour")  # only the window's metrics
    return frame(
        con,
        f"""
        WITH cost AS (
            SELECT {resource_hour_columns("provider")},
                   -- an on-prem node bills one line set per GPU (ResourceName node/gpuN, x_GpuCount 1)
                   greatest(max(c."x_GpuCount"), count(DISTINCT c."ResourceName")
                            FILTER (WHERE c."ProviderName" = 'onprem')) AS gpu_count,
                   any_value(c."PricingCategory") AS pricing_category,
                   sum(c."EffectiveCost") AS effective_cost
            FROM cost_line_items c
            WHERE {GPU_RESOURCE_USAGE} AND {where}
            GROUP BY 1, 2),
        util AS (
            SELECT resource_id, hour, count(DISTINCT gpu_uuid) AS gpus_reporting,
                   max(util_max) AS util_max, avg(util_mean) AS util_mean, max(util_p95) AS util_p95,
                   max(mem_used_max_mib) AS mem_used_max_mib, max(mem_total_mib) AS mem_total_mib,
                   avg(sm_active_mean) AS sm_active_mean, max(sm_active_mean) AS sm_active_max,
                   avg(tensor_active_mean) AS tensor_active_mean,
                   sum(power_mean_w) AS power_w, string_agg(DISTINCT team, ',' ORDER BY team) AS metric_teams
            FROM gpu_metrics_hourly WHERE resource_id IS NOT NULL AND {util_where} GROUP BY 1, 2)
        SELECT cost.*, util.gpus_reporting, util.util_max, util.util_mean, util.util_p95,
               util.mem_used_max_mib, util.mem_total_mib, util.sm_active_mean, util.sm_active_max,
               util.tensor_active_mean,
               util.power_w, util.metric_teams
        FROM cost LEFT JOIN util USING (resource_id, hour)
        ORDER BY resource_id, hour""",
        params + util_params,
    )


def unattributed_gpu_hours(
    con: duckdb.DuckDBPyConnection, *, start: datetime | None = None, end: datetime | None = None
) -> pl.DataFrame:
    """GPU-hours that no team can be charged for, per source and host: ``missing`` says whether no billed
    resource claims them (fix the resource_map, or the bill has not arrived) or the resource has no team
    (tag it, or map its namespace). The fleet page's "(unattributed)" row is exactly these hours."""
    where, params = filters(None, start, end, time_col="hour")
    return frame(
        con,
        f"""
        SELECT source, host, CASE WHEN resource_id IS NULL THEN 'billed resource' ELSE 'team' END AS missing,
               any_value(resource_id) AS resource_id, count(*) AS gpu_hours, count(DISTINCT gpu_uuid) AS gpus,
               min(hour) AS first_hour, max(hour) AS last_hour
        FROM gpu_metrics_hourly WHERE (resource_id IS NULL OR team IS NULL) AND {where}
        GROUP BY source, host, missing ORDER BY gpu_hours DESC, source, host""",
        params,
    )


def gpu_hours_attribution(
    con: duckdb.DuckDBPyConnection, *, start: datetime | None = None, end: datetime | None = None
) -> pl.DataFrame:
    """Per metrics source: GPU-hours measured, how many were matched to a billed resource and a team,
    and the unattributed share (0–1). A MIG slice's hour counts as one GPU-hour of its slice."""
    where, params = filters(None, start, end, time_col="hour")
    return frame(
        con,
        f"""
        SELECT source, count(*) AS gpu_hours,
               count(*) FILTER (WHERE resource_id IS NOT NULL) AS attributed_gpu_hours,
               count(*) FILTER (WHERE resource_id IS NULL) AS unattributed_gpu_hours,
               count(*) FILTER (WHERE team IS NOT NULL) AS team_gpu_hours,
               count(*) FILTER (WHERE resource_id IS NULL) / count(*) AS unattributed_share
        FROM gpu_metrics_hourly WHERE {where} GROUP BY source ORDER BY source""",
        params,
    )


def gpu_count_disagreements(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Resources whose metrics report a different number of GPUs than their instance type holds.

    Expected: the catalogue's count, else the bill's ``x_GpuCount``, else the inventory's (on-prem: the
    node's per-GPU lines). Measured: the most distinct whole GPUs reporting in one hour. Neither is
    preferred silently: a node reporting more GPUs than its type has is mis-attributed metrics, one
    reporting fewer has GPUs without an exporter (gpu_count withholds it).
    """
    return frame(
        con,
        f"""
        WITH billed AS (
            SELECT c."ResourceId" AS resource_id, any_value(c."ProviderName") AS provider,
                   any_value(c."x_InstanceType") AS instance_type, max(c."x_GpuCount") AS bill_gpus,
                   count(DISTINCT c."ResourceName") FILTER (WHERE c."ProviderName" = 'onprem') AS onprem_gpus
            FROM cost_line_items c
            WHERE {GPU_RESOURCE_USAGE} GROUP BY 1),
        per_hour AS (
            SELECT resource_id, hour, count(DISTINCT gpu_uuid) AS gpus FROM gpu_metrics_hourly
            WHERE resource_id IS NOT NULL AND mig_instance IS NULL GROUP BY 1, 2),
        measured AS (SELECT resource_id, max(gpus) AS measured_gpus, max(hour) AS last_measured_hour
                     FROM per_hour GROUP BY 1),
        expected AS (
            SELECT b.resource_id, b.provider, b.instance_type,
                   CASE WHEN b.onprem_gpus > 0 THEN b.onprem_gpus
                        ELSE {reference.resolved_gpu_count("b.bill_gpus", "inv")} END AS expected_gpus,
                   CASE WHEN b.onprem_gpus > 0 THEN 'on-prem lines' WHEN inv.origin = 'catalogue' THEN 'catalogue'
                        WHEN b.bill_gpus IS NOT NULL THEN 'bill' WHEN inv.gpu_count IS NOT NULL THEN 'inventory'
                   END AS expected_from
            FROM billed b LEFT JOIN {reference.INSTANCE_GPUS_SQL} inv USING (instance_type))
        SELECT e.resource_id, e.provider, e.instance_type, e.expected_gpus, e.expected_from, m.measured_gpus,
               CASE WHEN m.measured_gpus > e.expected_gpus THEN 'more GPUs measured than the type has'
                    ELSE 'fewer GPUs report metrics than the type has' END AS problem,
               m.last_measured_hour
        FROM expected e JOIN measured m USING (resource_id)
        WHERE e.expected_gpus IS NOT NULL AND m.measured_gpus <> e.expected_gpus
        ORDER BY e.resource_id""",
    )


def resource_utilisation(
    con: duckdb.DuckDBPyConnection, resource_id: str, *, start: datetime | None = None, end: datetime | None = None
) -> pl.DataFrame:
    """Hourly utilisation and memory of one billed resource (a recommendation's evidence chart).
    Callers take ``resource_id`` from a recommendation already read through their team scope."""
    where, params = filters(None, start, end, time_col="hour")
    return frame(
        con,
        f"""
        SELECT hour, any_value(gpu_model) AS gpu_model, count(DISTINCT gpu_uuid) AS gpus,
               avg(util_mean) AS util_mean, max(util_max) AS util_max,
               max(mem_used_max_mib) / 1024.0 AS mem_used_max_gib, max(mem_total_mib) / 1024.0 AS mem_total_gib
        FROM gpu_metrics_hourly WHERE resource_id = ? AND {where} GROUP BY hour ORDER BY hour""",
        [resource_id] + params,
    )


def gpu_memory_gib(con: duckdb.DuckDBPyConnection, gpu_models: list[str]) -> pl.DataFrame:
    """Memory per GPU model from the reference specs (a proposed GPU's capacity line)."""
    return frame(
        con,
        "SELECT gpu_model, memory_gib FROM gpu_specs WHERE gpu_model IN (SELECT unnest(?::VARCHAR[]))",
        [list(gpu_models)],
    )


def fleet_utilisation(
    con: duckdb.DuckDBPyConnection,
    *,
    team: str | list[str] | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
) -> pl.DataFrame:
    """Per team × GPU model: GPU-hours measured and their mean / p95 utilisation (the fleet heatmap)."""
    where, params = filters(team, start, end, team_col="team", time_col="hour")
    return frame(
        con,
        f"""
        SELECT coalesce(team, '(unattributed)') AS team, gpu_model, count(*) AS gpu_hours,
               avg(util_mean) AS util_mean, avg(util_p95) AS util_p95
        FROM gpu_metrics_hourly WHERE {where} GROUP BY ALL ORDER BY team, gpu_model""",
        params,
    )


def idle_gpu_cost(
    con: duckdb.DuckDBPyConnection,
    *,
    team: str | list[str] | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    idle_util_pct: float = 5.0,
) -> pl.DataFrame:
    """Per team × GPU model: GPU cost in the window, and the billed GPU resource-hours that were idle
    (measured peak utilisation under ``idle_util_pct``), their GPU-hours and their cost. Hours
    without metrics are not idle. The idle hours are found in the (small) metrics table first and
    only the cost lines of those hours are grouped per resource-hour."""
    where, params = filters(team, start, end)
    util_where, util_params = filters(None, start, end, time_col="hour")
    day_where, day_params = filters(team, start, end, team_col="d.team", time_col="d.day")
    return frame(
        con,
        f"""
        WITH idle AS (
            SELECT resource_id, epoch_us(hour) // 3600000000 AS hour_n FROM gpu_metrics_hourly
            WHERE resource_id IS NOT NULL AND {util_where} GROUP BY 1, 2 HAVING max(util_max) < ?),
        lines AS (
            SELECT c."x_Team" AS team, c."x_GpuModel" AS gpu_model, c."ResourceId" AS resource_id,
                   epoch_us(c."ChargePeriodStart") // 3600000000 AS hour_n, c."x_GpuCount" AS gpu_count,
                   c."EffectiveCost" AS effective_cost
            FROM cost_line_items c
            WHERE {GPU_RESOURCE_USAGE} AND {where}),
        totals AS (  -- from the daily rollup the cost loads keep: the window's GPU usage lines, summed
            SELECT d.team, d.gpu_model, sum(d.gpu_usage_cost) AS gpu_cost FROM cost_daily d
            WHERE {day_where} GROUP BY ALL HAVING sum(d.gpu_usage_lines) > 0),
        idle_hours AS (
            SELECT l.team, l.gpu_model, l.resource_id, l.hour_n, max(l.gpu_count) AS gpu_count,
                   sum(l.effective_cost) AS effective_cost
            FROM lines l SEMI JOIN idle i ON l.resource_id = i.resource_id AND l.hour_n = i.hour_n GROUP BY ALL),
        idle_totals AS (
            SELECT team, gpu_model, count(*) AS idle_resource_hours, sum(gpu_count) AS idle_gpu_hours,
                   sum(effective_cost) AS idle_cost FROM idle_hours GROUP BY ALL)
        SELECT t.team, t.gpu_model, coalesce(i.idle_resource_hours, 0) AS idle_resource_hours,
               coalesce(i.idle_gpu_hours, 0) AS idle_gpu_hours, coalesce(i.idle_cost, 0) AS idle_cost, t.gpu_cost
        FROM totals t LEFT JOIN idle_totals i ON t.team IS NOT DISTINCT FROM i.team
             AND t.gpu_model IS NOT DISTINCT FROM i.gpu_model
        ORDER BY idle_cost DESC, t.team, t.gpu_model""",
        util_params + [idle_util_pct] + params + day_params,
    )


def team_gpu_capacity(
    con: duckdb.DuckDBPyConnection, *, team: str | list[str] | None = None, days: int = 14
) -> pl.DataFrame:
    """Per (team, provider, GPU model): the peak number of GPUs billed at the same hour over the last
    ``days`` days of data, of them on spot (PricingCategory 'Dynamic'), and the instance types seen.
    The window ends at the newest charge, not at now, so an export of older data stays meaningful."""
    where, params = filters(team, None, None)
    return frame(
        con,
        f"""
        WITH per_resource AS (
            SELECT c."x_Team" AS team, c."ProviderName" AS provider_name, c."x_GpuModel" AS gpu_model,
                   date_trunc('hour', c."ChargePeriodStart") AS hour, c."ResourceId" AS resource_id,
                   max(c."x_GpuCount") AS gpus, bool_or(c."PricingCategory" = 'Dynamic') AS spot,
                   any_value(c."x_InstanceType") AS instance_type
            FROM cost_line_items c
            WHERE c."ChargeCategory" = 'Usage' AND c."x_GpuCount" > 0 AND c."ResourceId" IS NOT NULL
              AND c."ChargePeriodStart" >= (SELECT max("ChargePeriodStart") FROM cost_line_items)
                                           - to_days(CAST(? AS INTEGER))
              AND {where}
            GROUP BY ALL),
        hourly AS (
            SELECT team, provider_name, gpu_model, hour, sum(gpus) AS gpus,
                   sum(gpus) FILTER (WHERE spot) AS spot_gpus
            FROM per_resource GROUP BY ALL)
        SELECT h.team, h.provider_name, h.gpu_model, max(h.gpus) AS peak_gpus,
               coalesce(max(h.spot_gpus), 0) AS peak_spot_gpus,
               (SELECT list(DISTINCT p.instance_type ORDER BY p.instance_type) FROM per_resource p
                WHERE p.team IS NOT DISTINCT FROM h.team AND p.provider_name = h.provider_name
                  AND p.gpu_model IS NOT DISTINCT FROM h.gpu_model AND p.instance_type IS NOT NULL)
                   AS instance_types
        FROM hourly h GROUP BY h.team, h.provider_name, h.gpu_model
        ORDER BY h.team, h.provider_name, h.gpu_model""",
        [days] + params,
    )


def gpu_instance_inventory(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """The shipped GPU instance inventory (``gpu_instance_reference``): GPU model and count per type."""
    return frame(
        con,
        """
        SELECT provider, instance_type, gpu_model, gpu_count, gpu_fraction, gpu_memory_gib
        FROM gpu_instance_reference WHERE accelerator = 'gpu' AND gpu_count > 0 ORDER BY ALL""",
    )
