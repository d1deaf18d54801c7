"""The scheduler exports (jobs/export): the fleet per target cluster, its GPU-hours, node groups and namespaces."""

from __future__ import annotations

import duckdb
import polars as pl

from gpufinops.warehouse.queries.fragments import filters, frame


def _cluster_tag_sql(column: str = 'c."Tags"') -> str:
    """The first non-empty value of the given tag keys (the query's first parameter, a list)."""
    return (
        f"list_filter(json_extract_string({column}, list_transform(?::VARCHAR[], lambda k: '$.\"' || k || '\"')), "
        "lambda v: v IS NOT NULL AND v <> '')[1]"
    )


_EXPORT_LINES = """
    SELECT c."ResourceId" AS resource_id, coalesce(c."ResourceName", '') AS unit, c."x_Team" AS team,
           c."ProviderName" AS provider_name, c."RegionId" AS region, c."SubAccountId" AS account,
           {tag} AS cluster_tag, c."x_InstanceType" AS instance_type, c."x_GpuModel" AS gpu_model,
           date_trunc('hour', c."ChargePeriodStart") AS hour, c."ChargePeriodStart" AS charged_at,
           CAST(ceil(c."x_GpuCount") AS BIGINT) AS gpus, c."PricingCategory" = 'Dynamic' AS spot
    FROM cost_line_items c
    WHERE c."ChargeCategory" = 'Usage' AND c."x_GpuCount" > 0 AND c."ResourceId" IS NOT NULL
      AND c."ChargePeriodStart" >= (SELECT max("ChargePeriodStart") FROM cost_line_items) - to_days(CAST(? AS INTEGER))
      AND {where}"""


def export_gpu_resources(
    con: duckdb.DuckDBPyConnection,
    *,
    tag_keys: list[str] | tuple[str, ...] = (),
    team: str | list[str] | None = None,
    days: int = 14,
) -> pl.DataFrame:
    """Per billed GPU resource over the last ``days`` days of data (the window ends at the newest charge):
    where it runs (provider, region, account, the newest value of the first of ``tag_keys`` it carries),
    its newest instance type, GPU model and team, and its GPUs at its busiest hour (an on-prem node's
    GPUs are its distinct ``ResourceName`` slots), of them on spot."""
    where, params = filters(team, None, None)
    return frame(
        con,
        f"""
        WITH lines AS ({_EXPORT_LINES.format(tag=_cluster_tag_sql(), where=where)}),
        units AS (SELECT resource_id, hour, unit, max(gpus) AS gpus, bool_or(spot) AS spot FROM lines GROUP BY ALL),
        hourly AS (SELECT resource_id, hour, sum(gpus) AS gpus, sum(gpus) FILTER (WHERE spot) AS spot_gpus
                   FROM units GROUP BY ALL),
        peaks AS (SELECT resource_id, CAST(max(gpus) AS BIGINT) AS gpus,
                         CAST(coalesce(max(spot_gpus), 0) AS BIGINT) AS spot_gpus FROM hourly GROUP BY ALL),
        latest AS (
            SELECT resource_id, arg_max(team, charged_at) AS team, any_value(provider_name) AS provider_name,
                   arg_max(region, charged_at) AS region, arg_max(account, charged_at) AS account,
                   arg_max(cluster_tag, charged_at) FILTER (WHERE cluster_tag IS NOT NULL) AS cluster_tag,
                   arg_max(instance_type, charged_at) AS instance_type, arg_max(gpu_model, charged_at) AS gpu_model
            FROM lines GROUP BY resource_id)
        SELECT l.*, p.gpus, p.spot_gpus FROM latest l JOIN peaks p USING (resource_id)
        ORDER BY l.resource_id""",
        [list(tag_keys), days] + params,
    )


def export_gpu_hours(
    con: duckdb.DuckDBPyConnection, *, team: str | list[str] | None = None, days: int = 14
) -> pl.DataFrame:
    """Billed GPUs per (resource, team, GPU model, hour) over the same window as ``export_gpu_resources``
    (an on-prem node's slots may be billed to several teams), of them on spot: the input of the peak
    concurrent GPUs per cluster, team and model."""
    where, params = filters(team, None, None)
    return frame(
        con,
        f"""
        WITH lines AS ({_EXPORT_LINES.format(tag="NULL", where=where)}),
        units AS (SELECT resource_id, team, gpu_model, hour, unit, max(gpus) AS gpus, bool_or(spot) AS spot
                  FROM lines GROUP BY ALL)
        SELECT resource_id, team, gpu_model, hour, CAST(sum(gpus) AS BIGINT) AS gpus,
               CAST(coalesce(sum(gpus) FILTER (WHERE spot), 0) AS BIGINT) AS spot_gpus
        FROM units GROUP BY ALL ORDER BY ALL""",
        [days] + params,
    )


def export_onprem_node_groups(con: duckdb.DuckDBPyConnection, *, days: int = 14) -> pl.DataFrame:
    """Per on-prem (cluster, node group) in the newest ``days`` days of its cost lines: its GPU model, nodes,
    GPUs (distinct ``ResourceName`` slots: every configured GPU is billed every hour) and GPUs per node."""
    return frame(
        con,
        """
        WITH slots AS (
            SELECT c."SubAccountId" AS cluster, c."x_InstanceType" AS node_group, c."ResourceId" AS node,
                   any_value(c."x_GpuModel") AS gpu_model, CAST(count(DISTINCT c."ResourceName") AS BIGINT) AS gpus
            FROM cost_line_items c
            WHERE c."ProviderName" = 'onprem' AND c."ChargeCategory" = 'Usage' AND c."x_GpuCount" > 0
              AND c."ChargePeriodStart" >= (SELECT max("ChargePeriodStart") FROM cost_line_items c2
                                            WHERE c2."ProviderName" = 'onprem') - to_days(CAST(? AS INTEGER))
            GROUP BY ALL)
        SELECT cluster, node_group, any_value(gpu_model) AS gpu_model, count(*) AS nodes, CAST(sum(gpus) AS BIGINT) AS gpus,
               max(gpus) AS gpus_per_node
        FROM slots GROUP BY ALL ORDER BY ALL""",
        [days],
    )


def export_team_namespaces(con: duckdb.DuckDBPyConnection, *, days: int = 14) -> pl.DataFrame:
    """(resource_id, team, namespace): the namespaces a metrics source's ``namespace_teams`` maps to a team
    and whose GPU-hours were measured on the resource in the newest ``days`` days of metrics."""
    return frame(
        con,
        """
        SELECT DISTINCT m.resource_id, r.value AS team, m.namespace
        FROM gpu_metrics_hourly m
        JOIN attribution_rules r ON r.kind = 'namespace_teams' AND r.source = m.source AND r.key = m.namespace
        WHERE m.resource_id IS NOT NULL
          AND m.hour >= (SELECT max(hour) FROM gpu_metrics_hourly) - to_days(CAST(? AS INTEGER))
        ORDER BY ALL""",
        [days],
    )
