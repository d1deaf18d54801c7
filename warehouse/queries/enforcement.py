"""Budget enforcement (jobs/enforce): each resource's GPU-hours, cost and capacity type, and the GPUs it
held in the newest hour of data (what running work holds now)."""

from __future__ import annotations

import duckdb
import polars as pl

from gpufinops.warehouse.queries.fragments import frame


def flavor_usage(con: duckdb.DuckDBPyConnection, *, days: int = 14) -> pl.DataFrame:
    """Per (resource, team, GPU model, capacity) over the newest ``days`` days of cost data: GPU-hours,
    EffectiveCost (exact), the GPUs billed in the newest hour, and the peak committed GPUs. ``capacity``
    is spot (PricingCategory Dynamic), committed (Committed), onprem, else on-demand."""
    return frame(
        con,
        """
        WITH edge AS (SELECT max("ChargePeriodStart") AS newest FROM cost_line_items),
        lines AS (
            SELECT c."ResourceId" AS resource_id, c."x_Team" AS team, c."x_GpuModel" AS gpu_model,
                   CASE WHEN lower(c."ProviderName") = 'onprem' THEN 'onprem'
                        WHEN c."PricingCategory" = 'Dynamic' THEN 'spot'
                        WHEN c."PricingCategory" = 'Committed' THEN 'committed'
                        ELSE 'on-demand' END AS capacity,
                   c."x_GpuCount" * (epoch(c."ChargePeriodEnd") - epoch(c."ChargePeriodStart")) / 3600.0
                       AS gpu_hours,
                   c."EffectiveCost" AS cost, date_trunc('hour', c."ChargePeriodStart") AS hour,
                   c."x_GpuCount" AS gpus
            FROM cost_line_items c, edge
            WHERE c."ChargeCategory" = 'Usage' AND c."x_GpuCount" > 0 AND c."ResourceId" IS NOT NULL
              AND c."x_GpuModel" IS NOT NULL AND c."ChargePeriodStart" >= edge.newest - to_days(CAST(? AS INTEGER))),
        hourly AS (SELECT resource_id, team, gpu_model, capacity, hour, sum(gpus) AS gpus FROM lines GROUP BY ALL)
        SELECT l.resource_id, l.team, l.gpu_model, l.capacity, sum(l.gpu_hours) AS gpu_hours, sum(l.cost) AS cost,
               CAST(coalesce(max(h.gpus) FILTER (WHERE h.hour = (SELECT max(hour) FROM hourly)), 0) AS BIGINT)
                   AS running_gpus,
               CAST(coalesce(max(h.gpus), 0) AS BIGINT) AS peak_gpus
        FROM lines l
        JOIN hourly h USING (resource_id, team, gpu_model, capacity, hour)
        GROUP BY ALL ORDER BY ALL""",
        [days],
    )


def month_lines(con: duckdb.DuckDBPyConnection, teams: list[str], start, end) -> pl.DataFrame:
    """Every cost line of ``teams`` charged in [start, end), per (resource, unit, hour): the GPU lines
    (a GPU count, a model and a resource) with their GPUs, flavor and exact cost, and the rest (``gpus`` 0:
    storage, network, … — spend a scheduler cannot refuse) at the hour they start."""
    return frame(
        con,
        """
        SELECT c."ResourceId" AS resource_id, coalesce(c."ResourceName", '') AS unit,
               c."ProviderName" AS provider_name, c."x_GpuModel" AS gpu_model,
               CASE WHEN lower(c."ProviderName") = 'onprem' THEN 'onprem'
                    WHEN c."PricingCategory" = 'Dynamic' THEN 'spot' ELSE 'on-demand' END AS capacity,
               date_trunc('hour', c."ChargePeriodStart") AS hour,
               CAST(CASE WHEN c."x_GpuCount" > 0 AND c."x_GpuModel" IS NOT NULL AND c."ResourceId" IS NOT NULL
                         THEN ceil(max(c."x_GpuCount")) ELSE 0 END AS BIGINT) AS gpus,
               sum(c."EffectiveCost") AS cost
        FROM cost_line_items c
        WHERE c."x_Team" IN (SELECT unnest(?::VARCHAR[]))
          AND c."ChargePeriodStart" >= ? AND c."ChargePeriodStart" < ?
        GROUP BY c."ResourceId", coalesce(c."ResourceName", ''), c."ProviderName", c."x_GpuModel", 5, 6,
                 c."x_GpuCount" > 0 AND c."x_GpuModel" IS NOT NULL AND c."ResourceId" IS NOT NULL
        ORDER BY hour, resource_id, unit""",
        [teams, start, end],
    )


def non_gpu_cost(con: duckdb.DuckDBPyConnection, team: str, start, end):
    """The exact EffectiveCost of ``team``'s lines without GPUs (storage, network, …) charged in [start, end)."""
    row = con.execute(
        """
        SELECT coalesce(sum(c."EffectiveCost"), 0) FROM cost_line_items c
        WHERE c."x_Team" = ? AND c."ChargePeriodStart" >= ? AND c."ChargePeriodStart" < ?
          AND NOT coalesce(c."x_GpuCount" > 0 AND c."x_GpuModel" IS NOT NULL AND c."ResourceId" IS NOT NULL, FALSE)""",
        [team, start, end],
    ).fetchall()
    return row[0][0]
