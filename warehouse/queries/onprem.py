"""On-prem against cloud: the on-prem GPU usage and every cloud price for a GPU machine."""

from __future__ import annotations

from datetime import datetime

import duckdb
import polars as pl

from gpufinops.warehouse.queries.fragments import GPU_USAGE, filters, frame, provider_code


def onprem_gpu_usage(
    con: duckdb.DuckDBPyConnection, *, start: datetime | None = None, end: datetime | None = None
) -> pl.DataFrame:
    """Per on-prem (cluster, node group, team, workload): GPU-hours, the utilisation measured in them
    (``util_pct_sum`` over ``measured_gpu_hours``, exact DECIMAL), cost by component, the cost-model
    figures the ``onprem`` source priced them with (from the energy lines' Tags), how the power was
    known, and the spread of the hourly mean utilisation (p95, share of hours at 90 % or more)."""
    where, params = filters(None, start, end)
    return frame(
        con,
        f"""
        WITH lines AS (
            SELECT c."SubAccountId" AS cluster, c."RegionId" AS region, c."x_InstanceType" AS node_group,
                   c."x_GpuModel" AS gpu_model, c."x_Team" AS team, c."ResourceId" AS node,
                   c."ResourceName" AS gpu, c."ChargePeriodStart" AS hour, c."EffectiveCost" AS cost,
                   json_extract_string(c."Tags", ['$.cost_component', '$.workload', '$.util_pct', '$.power_basis',
                       '$.tdp_w', '$.idle_w', '$.host_w_per_gpu', '$.pue', '$.usd_per_kwh', '$.checkpointing']) AS t
            FROM cost_line_items c WHERE c."ProviderName" = 'onprem' AND {where}),
        typed AS (
            SELECT * EXCLUDE (t), t[1] AS component, t[2] AS workload, CAST(t[3] AS DECIMAL(18, 2)) AS util_pct,
                   t[4] AS power_basis, t[5] AS tdp_w, t[6] AS idle_w, t[7] AS host_w_per_gpu, t[8] AS pue,
                   t[9] AS usd_per_kwh, t[10] AS checkpointing FROM lines),
        hourly AS (
            SELECT cluster, node_group, team, workload, hour, avg(util_pct) AS util
            FROM typed WHERE component = 'energy' GROUP BY ALL)
        SELECT t.cluster, any_value(t.region) AS region, t.node_group, any_value(t.gpu_model) AS gpu_model,
               t.team, t.workload, any_value(t.checkpointing) AS checkpointing,
               count(*) FILTER (WHERE component = 'energy') AS gpu_hours,
               count(DISTINCT t.gpu) AS gpus, count(DISTINCT t.node) AS nodes,
               count(t.util_pct) AS measured_gpu_hours, coalesce(sum(t.util_pct), 0) AS util_pct_sum,
               sum(t.cost) AS cost_usd, coalesce(sum(t.cost) FILTER (WHERE component = 'hardware'), 0) AS hardware_usd,
               coalesce(sum(t.cost) FILTER (WHERE component = 'energy'), 0) AS energy_usd,
               coalesce(sum(t.cost) FILTER (WHERE component = 'facility'), 0) AS facility_usd,
               any_value(t.tdp_w) AS tdp_w, any_value(t.idle_w) AS idle_w, any_value(t.host_w_per_gpu) AS host_w_per_gpu,
               any_value(t.pue) AS pue, any_value(t.usd_per_kwh) AS usd_per_kwh,
               string_agg(DISTINCT t.power_basis, ',' ORDER BY t.power_basis) AS power_bases,
               count(*) FILTER (WHERE component = 'energy' AND power_basis <> 'measured') AS unmeasured_power_gpu_hours,
               min(t.hour) AS first_hour, max(t.hour) AS last_hour,
               (SELECT quantile_cont(h.util, 0.95) FROM hourly h WHERE h.cluster = t.cluster AND h.node_group = t.node_group
                   AND h.team IS NOT DISTINCT FROM t.team AND h.workload IS NOT DISTINCT FROM t.workload) AS hourly_util_p95,
               (SELECT avg(CASE WHEN h.util >= 90 THEN 1.0 ELSE 0.0 END) FROM hourly h WHERE h.cluster = t.cluster
                   AND h.node_group = t.node_group AND h.team IS NOT DISTINCT FROM t.team
                   AND h.workload IS NOT DISTINCT FROM t.workload) AS saturated_hour_share
        FROM typed t GROUP BY t.cluster, t.node_group, t.team, t.workload
        ORDER BY t.cluster, t.node_group, t.team, t.workload""",
        params,
    )


def cloud_gpu_offers(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Every cloud price for a GPU machine: (provider, region, instance type, pricing = on_demand |
    spot | commit_1y | commit_3y, $/h, origin) with its GPU model, count and the GPU's memory and
    FP16 throughput. From the catalogues (``instance_types`` on-demand, the latest ``price_history``
    row per pricing, ``spot_prices`` averaged over their last 30 days) and, where a catalogue has no
    price, what the bills show (the hourly list price; the spot rate actually paid). A price in another
    currency than USD is left out."""
    return frame(
        con,
        f"""
        WITH it AS (
            SELECT provider, region, instance_type, any_value(gpu_model) AS gpu_model, max(gpu_count) AS gpu_count
            FROM instance_types WHERE gpu_count > 0 GROUP BY ALL),
        billed AS (
            SELECT {provider_code('lower(c."ProviderName")')} AS provider,
                   c."RegionId" AS region, c."x_InstanceType" AS instance_type, any_value(c."x_GpuModel") AS gpu_model,
                   max(c."x_GpuCount") AS gpu_count,
                   median(c."ListUnitPrice") FILTER (WHERE c."ListUnitPrice" > 0) AS on_demand,
                   median(c."EffectiveCost" / c."ConsumedQuantity")
                       FILTER (WHERE c."PricingCategory" = 'Dynamic' AND c."ConsumedQuantity" > 0) AS spot
            FROM cost_line_items c
            WHERE c."ChargeCategory" = 'Usage' AND c."ProviderName" <> 'onprem' AND {GPU_USAGE}
              AND c."x_InstanceType" IS NOT NULL AND c."ConsumedUnit" IN ('Hours', 'Hrs', 'Hour', 'hour', 'h')
            GROUP BY 1, 2, 3),
        prices AS (
            SELECT provider, region, instance_type, 'on_demand' AS pricing,
                   CAST(on_demand_usd_per_hour AS DOUBLE) AS usd_per_hour, 'instance_types' AS origin
            FROM instance_types WHERE on_demand_usd_per_hour > 0 AND gpu_count > 0
            UNION ALL
            SELECT provider, region, instance_type, pricing, CAST(arg_max(price, effective_from) AS DOUBLE),
                   'price_history' FROM price_history
            WHERE pricing IN ('on_demand', 'spot', 'commit_1y', 'commit_3y') AND coalesce(currency, 'USD') = 'USD'
            GROUP BY provider, region, instance_type, pricing
            UNION ALL
            SELECT provider, region, instance_type, 'spot', CAST(avg(price_usd) AS DOUBLE), 'spot_prices'
            FROM spot_prices s WHERE ts >= (SELECT max(ts) FROM spot_prices) - INTERVAL 30 DAY
            GROUP BY provider, region, instance_type
            UNION ALL
            SELECT provider, region, instance_type, 'on_demand', CAST(on_demand AS DOUBLE), 'bills' FROM billed
            WHERE on_demand IS NOT NULL
            UNION ALL
            SELECT provider, region, instance_type, 'spot', CAST(spot AS DOUBLE), 'bills' FROM billed WHERE spot IS NOT NULL),
        ranked AS (  -- per (provider, region, type, pricing): a catalogue price before what a bill shows
            SELECT *, row_number() OVER (PARTITION BY provider, region, instance_type, pricing
                                         ORDER BY CASE origin WHEN 'bills' THEN 1 ELSE 0 END, origin) AS rn
            FROM prices WHERE usd_per_hour > 0)
        SELECT r.provider, r.region, r.instance_type, r.pricing, r.usd_per_hour, r.origin,
               coalesce(it.gpu_model, b.gpu_model) AS gpu_model, coalesce(it.gpu_count, b.gpu_count) AS gpu_count,
               s.memory_gib, s.fp16_tflops
        FROM ranked r
        LEFT JOIN it USING (provider, region, instance_type)
        LEFT JOIN billed b USING (provider, region, instance_type)
        LEFT JOIN gpu_specs s ON s.gpu_model = coalesce(it.gpu_model, b.gpu_model)
        WHERE r.rn = 1 AND coalesce(it.gpu_count, b.gpu_count) > 0
        ORDER BY r.provider, r.region, r.instance_type, r.pricing""",
    )
