"""Rightsizing inputs: per-resource GPU usage and cost, and what can be bought where."""

from __future__ import annotations

from datetime import datetime

import duckdb
import polars as pl

from gpufinops.warehouse import reference
from gpufinops.warehouse.queries.fragments import (
    GPU_RESOURCE_USAGE,
    GPU_USAGE,
    frame,
    provider_code,
    resource_hour_columns,
)

_RIGHTSIZING_COST = f"""
    SELECT {resource_hour_columns("provider")}, max(c."x_GpuCount") AS gpu_count,
           any_value(c."PricingCategory") AS pricing_category, any_value(CAST(c."Tags" AS VARCHAR)) AS tags,
           sum(c."EffectiveCost") AS effective_cost
    FROM cost_line_items c
    WHERE {GPU_RESOURCE_USAGE} AND c."ChargePeriodStart" >= ?
    GROUP BY 1, 2"""


def rightsizing_resources(con: duckdb.DuckDBPyConnection, start: datetime) -> pl.DataFrame:
    """Per billed GPU resource since ``start``: its cost, billed and measured hours, and the spread of
    its hourly utilisation (the busiest GPU's p95 in each hour) as quantiles, peak memory, SM/tensor
    activity. The rightsizing models (gpu_type, quantization) read this; one row per resource."""
    return frame(
        con,
        f"""
        WITH cost AS ({_RIGHTSIZING_COST}),
        util AS (
            SELECT resource_id, hour, max(util_p95) AS util_p95, avg(util_mean) AS util_mean,
                   max(mem_used_max_mib) AS mem_used_max_mib, max(mem_total_mib) AS mem_total_mib,
                   avg(sm_active_mean) AS sm_active_mean, avg(tensor_active_mean) AS tensor_active_mean
            FROM gpu_metrics_hourly WHERE resource_id IS NOT NULL AND hour >= ? GROUP BY 1, 2)
        SELECT cost.resource_id, any_value(cost.provider) AS provider, any_value(cost.team) AS team,
               any_value(cost.region) AS region, any_value(cost.instance_type) AS instance_type,
               any_value(cost.gpu_model) AS gpu_model,
               any_value({reference.resolved_gpu_count("cost.gpu_count", "inv")}) AS gpu_count,
               mode(cost.pricing_category) AS pricing_category, any_value(cost.tags) AS tags,
               count(*) AS billed_hours, count(util.util_p95) AS measured_hours,
               sum(effective_cost) AS cost_usd, min(cost.hour) AS first_hour, max(cost.hour) AS last_hour,
               quantile_cont(util.util_p95, [0.1, 0.25, 0.5, 0.75, 0.9, 0.95]) AS util_quantiles,
               quantile_cont(util.util_p95, 0.95) AS util_p95, avg(util.util_mean) AS util_mean,
               max(util.mem_used_max_mib) AS mem_used_max_mib, max(util.mem_total_mib) AS mem_total_mib,
               avg(util.sm_active_mean) AS sm_active_mean, avg(util.tensor_active_mean) AS tensor_active_mean
        FROM (SELECT resource_id, hour, provider, team, region, instance_type, gpu_model, pricing_category, tags,
                     effective_cost, max(gpu_count) OVER (PARTITION BY resource_id) AS gpu_count FROM cost) cost
        LEFT JOIN util USING (resource_id, hour) LEFT JOIN {reference.INSTANCE_GPUS_SQL} inv USING (instance_type)
        GROUP BY cost.resource_id ORDER BY cost.resource_id""",
        [start, start],
    )


def rightsizing_gpus(con: duckdb.DuckDBPyConnection, start: datetime) -> pl.DataFrame:
    """Per GPU of each billed GPU resource since ``start``: hours measured, the p95 of its hourly p95
    utilisation, its peak memory. gpu_count reads this to count the GPUs a resource keeps busy."""
    return frame(
        con,
        f"""
        WITH billed AS (SELECT DISTINCT resource_id FROM ({_RIGHTSIZING_COST}))
        SELECT m.resource_id, m.gpu_uuid, count(*) AS measured_hours,
               quantile_cont(m.util_p95, 0.95) AS util_p95, max(m.util_max) AS util_max,
               avg(m.util_mean) AS util_mean, max(m.mem_used_max_mib) AS mem_used_max_mib,
               max(m.mem_total_mib) AS mem_total_mib
        FROM gpu_metrics_hourly m JOIN billed USING (resource_id)
        WHERE m.hour >= ? GROUP BY 1, 2 ORDER BY 1, 2""",
        [start, start],
    )


def rightsizing_catalogue(con: duckdb.DuckDBPyConnection, *, reference: bool = False) -> pl.DataFrame:
    """What can be bought where: the ``instance_types`` catalogue, completed by the GPU instance types
    the bills themselves show on offer in a region, each with its GPU's memory and throughput from
    ``gpu_specs``. A billed type's hourly price is the median over its on-demand resource-hours of its
    last 3 billed days (the price in force now, after any change in the window) of the hour's summed ListCost (GCP bills GPU, vCPU and RAM as separate SKU lines; AWS one line). A
    catalogue row wins over a billed one. With ``reference``, the AWS GPU types of the shipped inventory
    are offered in us-east-1 at the shipped list price (karpenter's us-east-1 price list) where neither
    names them: what a new user without pricing credentials can still be told (origin 'reference')."""
    extra = ""
    if reference:
        con.register("_reference_prices", reference_prices_table())
        extra = """
            UNION ALL BY NAME
            SELECT 'aws' AS provider, p.region, p.instance_type, r.gpu_model, r.gpu_count,
                   CAST(p.ondemand_usd_per_hour AS DECIMAL(38, 15)) AS on_demand_usd_per_hour, 'reference' AS origin
            FROM _reference_prices p JOIN gpu_instance_reference r
                 ON r.provider = 'aws' AND r.instance_type = p.instance_type AND r.accelerator = 'gpu'
                    AND r.gpu_count > 0 AND coalesce(r.gpu_fraction, 1) = 1
            WHERE NOT EXISTS (SELECT 1 FROM instance_types i WHERE i.region = p.region
                              AND i.instance_type = p.instance_type AND i.on_demand_usd_per_hour > 0)
              AND NOT EXISTS (SELECT 1 FROM billed b WHERE b.region = p.region AND b.instance_type = p.instance_type)"""
    return frame(
        con,
        f"""
        WITH hours AS (
            SELECT lower(c."ProviderName") AS provider_name, c."RegionId" AS region,
                   c."x_InstanceType" AS instance_type, c."ResourceId" AS resource_id,
                   date_trunc('hour', c."ChargePeriodStart") AS hour, any_value(c."x_GpuModel") AS gpu_model,
                   max(c."x_GpuCount") AS gpu_count, sum(c."ListCost") AS list_cost
            FROM cost_line_items c
            WHERE c."ChargeCategory" = 'Usage' AND {GPU_USAGE} AND c."x_InstanceType" IS NOT NULL
              AND c."PricingCategory" = 'Standard' AND c."ResourceId" IS NOT NULL
            GROUP BY ALL),
        billed AS (
            SELECT provider_name, region, instance_type, any_value(gpu_model) AS gpu_model,
                   max(gpu_count) AS gpu_count,
                   median(list_cost) FILTER (WHERE hour > last_hour - INTERVAL 3 DAY) AS on_demand_usd_per_hour
            FROM (SELECT *, max(hour) OVER (PARTITION BY provider_name, region, instance_type) AS last_hour
                  FROM hours WHERE list_cost > 0)
            GROUP BY 1, 2, 3),
        offers AS (
            SELECT provider, region, instance_type, gpu_model, gpu_count,
                   CAST(on_demand_usd_per_hour AS DECIMAL(38, 15)) AS on_demand_usd_per_hour, 'catalogue' AS origin
            FROM instance_types WHERE gpu_count > 0 AND on_demand_usd_per_hour > 0
            UNION ALL BY NAME
            SELECT {provider_code("provider_name")} AS provider,
                   region, instance_type, gpu_model, gpu_count,
                   CAST(on_demand_usd_per_hour AS DECIMAL(38, 15)) AS on_demand_usd_per_hour, 'billed' AS origin
            FROM billed b WHERE NOT EXISTS (SELECT 1 FROM instance_types i WHERE i.region = b.region
                                            AND i.instance_type = b.instance_type AND i.on_demand_usd_per_hour > 0)
            {extra})
        SELECT o.*, s.memory_gib, s.memory_bandwidth_gbps, s.fp32_tflops, s.fp16_tflops, s.bf16_tflops, s.int8_tops
        FROM offers o LEFT JOIN gpu_specs s USING (gpu_model)
        ORDER BY provider, region, on_demand_usd_per_hour, instance_type""",
    )


def reference_prices_table():
    """The shipped us-east-1 on-demand list (warehouse/data/aws_ondemand_karpenter.csv) as Arrow."""
    import pyarrow.csv as pacsv

    return pacsv.read_csv(
        reference.KARPENTER_PRICES_PATH,
        convert_options=pacsv.ConvertOptions(
            column_types={"region": "string", "instance_type": "string", "ondemand_usd_per_hour": "string"}
        ),
    )
