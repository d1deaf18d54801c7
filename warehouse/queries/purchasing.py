"""Spot and commitment purchasing: spot prices and bands, spot / commitment coverage of the fleet."""

from __future__ import annotations

from datetime import datetime

import duckdb
import polars as pl

from gpufinops.warehouse.queries.fragments import GPU_RESOURCE_USAGE, GPU_USAGE, filters, frame, resource_hour_columns


def spot_series(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Which (provider, region, instance type) have spot price history, and how many points."""
    return frame(
        con,
        """
        SELECT provider, region, instance_type, count(*) AS points, min(ts) AS first_ts, max(ts) AS last_ts
        FROM spot_prices GROUP BY ALL ORDER BY provider, instance_type, region""",
    )


def spot_price_history(
    con: duckdb.DuckDBPyConnection, provider: str, instance_type: str, region: str | None = None
) -> pl.DataFrame:
    """Spot price points of one instance type (every region unless one is named), with the on-demand
    price of the same type and region (the instance catalogue, else the latest USD on-demand price
    in ``price_history``) for comparison."""
    clauses, params = ["s.provider = ?", "s.instance_type = ?"], [provider, instance_type]
    if region is not None:
        clauses.append("s.region = ?")
        params.append(region)
    return frame(
        con,
        f"""
        WITH od_all AS (
            SELECT provider, region, instance_type, max(on_demand_usd_per_hour) AS on_demand_usd
            FROM instance_types GROUP BY ALL
            UNION ALL
            SELECT provider, region, instance_type, arg_max(price, effective_from) AS on_demand_usd
            FROM price_history WHERE pricing = 'on_demand' AND currency = 'USD' GROUP BY ALL),
        od AS (SELECT provider, region, instance_type, max(on_demand_usd) AS on_demand_usd FROM od_all GROUP BY ALL)
        SELECT s.ts, s.region, s.zone, s.price_usd, od.on_demand_usd
        FROM spot_prices s LEFT JOIN od USING (provider, region, instance_type)
        WHERE {" AND ".join(clauses)} ORDER BY s.ts, s.region, s.zone""",
        params,
    )


def spot_interruption(con: duckdb.DuckDBPyConnection, *, instance_type: str | None = None) -> pl.DataFrame:
    """The latest interruption-frequency band and spot saving per instance type and region."""
    where, params = "TRUE", []
    if instance_type is not None:
        where, params = "instance_type = ?", [instance_type]
    return frame(
        con,
        f"""
        SELECT provider, region, instance_type, arg_max(band_label, updated_at) AS band_label,
               arg_max(band_index, updated_at) AS band_index, arg_max(savings_pct, updated_at) AS savings_pct
        FROM spot_interruption_bands WHERE {where} GROUP BY ALL ORDER BY instance_type, region""",
        params,
    )


def spot_price_changes(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Spot and on-demand $/h of each (provider, region, instance type) at every point either
    changed: from `price_history` (spot / on_demand rows) and, for AWS, `spot_prices` (per-zone
    points averaged per region and day) against `instance_types`' on-demand price."""
    return frame(
        con,
        """
        WITH ph AS (
            SELECT provider, region, instance_type, pricing, effective_from AS ts, CAST(price AS DOUBLE) AS price
            FROM price_history WHERE pricing IN ('spot', 'on_demand') AND price IS NOT NULL),
        stamps AS (SELECT DISTINCT provider, region, instance_type, ts FROM ph),
        spot AS (SELECT * FROM ph WHERE pricing = 'spot'),
        od AS (SELECT * FROM ph WHERE pricing = 'on_demand'),
        hist AS (
            SELECT s.provider, s.region, s.instance_type, s.ts, o.price AS on_demand_usd, p.price AS spot_usd
            FROM stamps s
            ASOF JOIN spot p ON s.provider = p.provider AND s.region = p.region
                AND s.instance_type = p.instance_type AND s.ts >= p.ts
            ASOF JOIN od o ON s.provider = o.provider AND s.region = o.region
                AND s.instance_type = o.instance_type AND s.ts >= o.ts),
        aws AS (
            SELECT sp.provider, sp.region, sp.instance_type, date_trunc('day', sp.ts) AS ts,
                   CAST(any_value(it.on_demand_usd_per_hour) AS DOUBLE) AS on_demand_usd,
                   CAST(avg(sp.price_usd) AS DOUBLE) AS spot_usd
            FROM spot_prices sp JOIN instance_types it
              ON it.provider = sp.provider AND it.region = sp.region AND it.instance_type = sp.instance_type
            WHERE (sp.product IS NULL OR sp.product ILIKE 'Linux/UNIX%') AND it.on_demand_usd_per_hour > 0
              AND NOT EXISTS (SELECT 1 FROM hist h WHERE h.provider = sp.provider AND h.region = sp.region
                              AND h.instance_type = sp.instance_type)
            GROUP BY 1, 2, 3, 4)
        SELECT * FROM hist WHERE on_demand_usd > 0 AND spot_usd IS NOT NULL
        UNION ALL SELECT * FROM aws
        ORDER BY provider, region, instance_type, ts""",
    )


def spot_mix_usage(con: duckdb.DuckDBPyConnection, *, start: datetime | None = None) -> pl.DataFrame:
    """Per GPU resource billed only on-demand since ``start``: hours, cost, tags, and its runs (the
    longest stretch of consecutive billed hours is the job length an interruption can waste)."""
    where, params = filters(None, start, None)
    return frame(
        con,
        f"""
        WITH h AS (
            SELECT {resource_hour_columns("provider_name")}, max(c."x_GpuCount") AS gpu_count,
                   any_value(c."Tags") AS tags, bool_and(c."PricingCategory" = 'Standard') AS on_demand,
                   CAST(sum(c."EffectiveCost") AS DOUBLE) AS cost_usd, CAST(sum(c."ListCost") AS DOUBLE) AS list_cost_usd
            FROM cost_line_items c
            WHERE {GPU_RESOURCE_USAGE} AND {where}
            GROUP BY 1, 2),
        runs AS (
            SELECT resource_id, hour - to_hours(CAST(row_number() OVER (PARTITION BY resource_id ORDER BY hour) AS BIGINT))
                   AS run FROM h),
        run_len AS (SELECT resource_id, run, count(*) AS hours FROM runs GROUP BY ALL),
        per_run AS (SELECT resource_id, count(*) AS runs, max(hours) AS longest_run_hours,
                           avg(hours) AS mean_run_hours FROM run_len GROUP BY ALL)
        SELECT h.resource_id, any_value(provider_name) AS provider_name, any_value(team) AS team,
               any_value(region) AS region, any_value(instance_type) AS instance_type,
               any_value(gpu_model) AS gpu_model, max(gpu_count) AS gpu_count, any_value(tags) AS tags,
               count(*) AS billed_hours, sum(cost_usd) AS cost_usd, sum(list_cost_usd) AS list_cost_usd,
               min(hour) AS first_hour, max(hour) AS last_hour, any_value(p.runs) AS runs,
               any_value(p.longest_run_hours) AS longest_run_hours, any_value(p.mean_run_hours) AS mean_run_hours
        FROM h JOIN per_run p USING (resource_id)
        GROUP BY h.resource_id HAVING bool_and(on_demand)
        ORDER BY h.resource_id""",
        params,
    )


def fleet_spot_ratios(con: duckdb.DuckDBPyConnection, *, start: datetime | None = None) -> pl.DataFrame:
    """What the fleet itself paid for spot: EffectiveCost / ListCost (on-demand list) of the GPU
    spot usage lines per (provider, region, instance type), with the hours behind it."""
    where, params = filters(None, start, None)
    return frame(
        con,
        f"""
        SELECT c."ProviderName" AS provider_name, c."RegionId" AS region, c."x_InstanceType" AS instance_type,
               CAST(sum(c."EffectiveCost") / sum(c."ListCost") AS DOUBLE) AS spot_ratio,
               count(*) AS spot_hours
        FROM cost_line_items c
        WHERE c."PricingCategory" = 'Dynamic' AND c."ChargeCategory" = 'Usage' AND {GPU_USAGE}
          AND c."ListCost" > 0 AND {where}
        GROUP BY ALL ORDER BY ALL""",
        params,
    )


def spot_bands(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """The spot advisor's interruption band and typical saving per (provider, region, instance type), Linux."""
    return frame(
        con,
        """
        SELECT provider, region, instance_type, any_value(band_index) AS band_index,
               any_value(band_label) AS band_label, any_value(band_max_pct) AS band_max_pct,
               any_value(savings_pct) AS savings_pct, any_value(source) AS source
        FROM spot_interruption_bands WHERE os IS NULL OR os ILIKE 'linux%'
        GROUP BY ALL ORDER BY ALL""",
    )


def commitment_prices(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """The latest catalogue price per (provider, region, instance type) for on-demand, 1-/3-year
    commitments (a reservation or CUD) and 1-/3-year savings plans, $/h (`price_history`; stored per hour)."""
    return frame(
        con,
        """
        SELECT provider, region, instance_type,
               CAST(arg_max(price, effective_from) FILTER (WHERE pricing = 'on_demand') AS DOUBLE) AS on_demand_usd,
               CAST(arg_max(price, effective_from) FILTER (WHERE pricing = 'commit_1y') AS DOUBLE) AS commit_1y_usd,
               CAST(arg_max(price, effective_from) FILTER (WHERE pricing = 'commit_3y') AS DOUBLE) AS commit_3y_usd,
               CAST(arg_max(price, effective_from) FILTER (WHERE pricing = 'savings_plan_1y') AS DOUBLE)
                   AS savings_plan_1y_usd,
               CAST(arg_max(price, effective_from) FILTER (WHERE pricing = 'savings_plan_3y') AS DOUBLE)
                   AS savings_plan_3y_usd,
               any_value(source) AS source
        FROM price_history
        WHERE pricing IN ('on_demand', 'commit_1y', 'commit_3y', 'savings_plan_1y', 'savings_plan_3y')
          AND price IS NOT NULL
        GROUP BY ALL ORDER BY ALL""",
    )


def fleet_commitment_ratios(con: duckdb.DuckDBPyConnection, *, start: datetime | None = None) -> pl.DataFrame:
    """What the fleet's own commitments cost against list: EffectiveCost / ListCost of the GPU usage
    lines covered by a commitment, per (provider, region, instance type) and commitment type."""
    where, params = filters(None, start, None)
    return frame(
        con,
        f"""
        SELECT c."ProviderName" AS provider_name, c."RegionId" AS region, c."x_InstanceType" AS instance_type,
               any_value(c."CommitmentDiscountType") AS commitment_type,
               CAST(sum(c."EffectiveCost") / sum(c."ListCost") AS DOUBLE) AS commit_ratio, count(*) AS hours
        FROM cost_line_items c
        WHERE c."PricingCategory" = 'Committed' AND c."ChargeCategory" = 'Usage' AND {GPU_USAGE}
          AND c."ListCost" > 0 AND {where}
        GROUP BY 1, 2, 3 ORDER BY ALL""",
        params,
    )
