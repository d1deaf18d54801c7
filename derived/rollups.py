"""Rollups kept in step with the fact tables, so readers scan days instead of line items.

``cost_daily`` holds cost per UTC day, source, provider, team, service and GPU model (with the GPU
share, and the GPU usage lines of billed resources the fleet view prices idle hours against).
Every cost load rebuilds its source's rows inside the load's own transaction
(:func:`refresh_cost_daily`, called by the ingest runner), so the rollup can never disagree with
``cost_line_items``; the migration that created it filled it from the line items already there.
Rebuilding a whole source costs one scan of a few narrow columns (0.6–0.9 s for a 10M-line source
here, 1–2 % of loading it); days are UTC, bucketed on epoch microseconds (per-row ``date_trunc`` on a
TIMESTAMPTZ goes through ICU and is several times slower).
"""

from __future__ import annotations

import duckdb

from gpufinops.derived.spec import Touched
from gpufinops.warehouse.queries.fragments import gpu_usage

GPU_USAGE = gpu_usage(None)  # cost_line_items unaliased


def cost_daily_insert_sql(*, all_sources: bool = False) -> str:
    """INSERT of the rollup rows of one source (bound parameter) or, with ``all_sources``, of all."""
    where = "TRUE" if all_sources else '"x_Source" IS NOT DISTINCT FROM ?'
    gpu_usage = f'{GPU_USAGE} AND "ChargeCategory" = \'Usage\' AND "ResourceId" IS NOT NULL'
    return f"""
        INSERT INTO cost_daily
        SELECT make_timestamptz(day_n * 86400000000) AS day, source, provider, team, service, gpu_model,
               billed_cost, effective_cost, gpu_cost, gpu_usage_cost, gpu_usage_lines, line_items, last_charge
        FROM (SELECT epoch_us("ChargePeriodStart") // 86400000000 AS day_n, "x_Source" AS source,
                     "ProviderName" AS provider, "x_Team" AS team, "ServiceName" AS service, "x_GpuModel" AS gpu_model,
                     sum("BilledCost") AS billed_cost, sum("EffectiveCost") AS effective_cost,
                     coalesce(sum("EffectiveCost") FILTER (WHERE {GPU_USAGE}), 0) AS gpu_cost,
                     coalesce(sum("EffectiveCost") FILTER (WHERE {gpu_usage}), 0) AS gpu_usage_cost,
                     count(*) FILTER (WHERE {gpu_usage}) AS gpu_usage_lines,
                     count(*) AS line_items, max("ChargePeriodStart") AS last_charge
              FROM cost_line_items WHERE {where} AND "ChargePeriodStart" IS NOT NULL
              GROUP BY ALL)"""


def refresh_cost_daily(con: duckdb.DuckDBPyConnection, source: str | None = None) -> None:
    """Rebuild ``cost_daily`` for one source (``None``: every source) from ``cost_line_items``.
    Runs in the caller's transaction."""
    if source is None:
        con.execute("DELETE FROM cost_daily")
        con.execute(cost_daily_insert_sql(all_sources=True))
        return
    con.execute("DELETE FROM cost_daily WHERE source IS NOT DISTINCT FROM ?", [source])
    con.execute(cost_daily_insert_sql(), [source])


def apply_load(con: duckdb.DuckDBPyConnection, touched: Touched) -> int:
    """The registry's apply: a load of line items rebuilds its source's days (derived/registry.py)."""
    if "cost_line_items" in touched.tables:
        refresh_cost_daily(con, touched.source)  # the daily rollup moves with the line items
    return 0
