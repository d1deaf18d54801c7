"""Spend: daily and total cost from the ``cost_daily`` rollup and the line items (dashboard, report, forecast)."""

from __future__ import annotations

from datetime import datetime

import duckdb
import polars as pl

from gpufinops.warehouse.queries.fragments import GPU_USAGE, filters, frame


def cost_totals(
    con: duckdb.DuckDBPyConnection,
    *,
    team: str | list[str] | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
) -> pl.DataFrame:
    """Totals per provider: billed, effective, GPU share, line items and the time span covered."""
    where, params = filters(team, start, end)
    return frame(
        con,
        f"""
        SELECT c."ProviderName" AS provider, count(*) AS line_items,
               sum(c."BilledCost") AS billed_cost, sum(c."EffectiveCost") AS effective_cost,
               coalesce(sum(c."EffectiveCost") FILTER (WHERE {GPU_USAGE}), 0) AS gpu_cost,
               min(c."ChargePeriodStart") AS first_charge, max(c."ChargePeriodEnd") AS last_charge
        FROM cost_line_items c WHERE {where} GROUP BY ALL ORDER BY provider""",
        params,
    )


def latest_charge_day(con: duckdb.DuckDBPyConnection, *, team: str | list[str] | None = None) -> datetime | None:
    """The last day with cost data in scope: "this month" on the dashboard is that day's month
    (from the ``cost_daily`` rollup the cost loads keep, and the team's share of shared GPUs)."""
    where, params = filters(team, None, None, team_col="d.team")
    where_alloc, alloc_params = filters(team, None, None, team_col="a.team")
    rows = con.execute(
        f"SELECT greatest((SELECT max(d.last_charge) FROM cost_daily d WHERE {where}), "
        f"(SELECT max(a.hour) FROM gpu_allocation_hourly a WHERE {where_alloc}))",
        params + alloc_params,
    ).fetchall()
    latest = rows[0][0]
    return latest.replace(hour=0, minute=0, second=0, microsecond=0) if latest is not None else None


def spend_daily(
    con: duckdb.DuckDBPyConnection,
    *,
    team: str | list[str] | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
) -> pl.DataFrame:
    """Daily EffectiveCost (and its GPU share) by provider, team and service: the columns of
    ``cost_daily`` the dashboard draws, read from the ``cost_daily`` rollup table (UTC days, kept by
    every cost load) rather than the line items. ``start``/``end`` are UTC day boundaries."""
    where, params = filters(team, start, end, team_col="d.team", time_col="d.day")
    return frame(
        con,
        f"""
        SELECT d.day, d.provider, d.team, d.service, sum(d.effective_cost) AS effective_cost,
               sum(d.gpu_cost) AS gpu_cost
        FROM cost_daily d WHERE {where} GROUP BY ALL ORDER BY day, provider, team, service""",
        params,
    )


def cost_teams(con: duckdb.DuckDBPyConnection, *, team: str | list[str] | None = None) -> list[str]:
    """The teams that have cost lines or a share of shared GPUs (within ``team`` when given), for the
    dashboard's team picker."""
    where, params = filters(team, None, None, team_col="d.team")
    where_alloc, alloc_params = filters(team, None, None, team_col="a.team")
    rows = con.execute(
        f"SELECT DISTINCT d.team FROM cost_daily d WHERE {where} AND d.team IS NOT NULL "
        f"UNION SELECT DISTINCT a.team FROM gpu_allocation_hourly a WHERE {where_alloc} "
        "AND a.team IS NOT NULL ORDER BY 1",
        params + alloc_params,
    ).fetchall()
    return [r[0] for r in rows]


def daily_cost_by_line_item(
    con: duckdb.DuckDBPyConnection,
    *,
    teams: list[str] | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
) -> pl.DataFrame:
    """Daily EffectiveCost per (team, provider, resource, service, SKU, charge description): what an
    anomaly is explained with."""
    where, params = filters(teams, start, end)
    return frame(
        con,
        f"""
        SELECT CAST(timezone('UTC', c."ChargePeriodStart") AS DATE) AS day, c."x_Team" AS team,
               c."ProviderName" AS provider_name, c."ResourceId" AS resource_id, c."ServiceName" AS service,
               c."SkuId" AS sku_id, c."ChargeDescription" AS charge_description,
               CAST(sum(c."EffectiveCost") AS DOUBLE) AS cost_usd
        FROM cost_line_items c WHERE {where}
        GROUP BY ALL ORDER BY team, provider_name, day""",
        params,
    )
