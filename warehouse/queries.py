"""Every query the models, the dashboard, the report and the API share.

Plain functions ``(con, filters) -> polars.DataFrame``: the heavy scans, rollups and joins run in
DuckDB SQL and hand their (small) result to polars through Arrow. Filters are bound parameters;
no caller's text is ever pasted into SQL.
"""

from __future__ import annotations

from datetime import datetime

import duckdb
import polars as pl

GPU_USAGE = "(c.\"x_GpuCount\" > 0 OR c.\"x_GpuModel\" IS NOT NULL)"


def _frame(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> pl.DataFrame:
    return pl.from_arrow(con.sql(sql, params=params or None).to_arrow_table())


def _filters(team: str | list[str] | None, start: datetime | None, end: datetime | None,
             team_col: str = 'c."x_Team"', time_col: str = 'c."ChargePeriodStart"') -> tuple[str, list]:
    clauses, params = ["TRUE"], []
    if team is not None:
        teams = [team] if isinstance(team, str) else list(team)
        clauses.append(f"{team_col} IN (SELECT unnest(?::VARCHAR[]))")
        params.append(teams)
    if start is not None:
        clauses.append(f"{time_col} >= ?")
        params.append(start)
    if end is not None:
        clauses.append(f"{time_col} < ?")
        params.append(end)
    return " AND ".join(clauses), params


def cost_daily(con: duckdb.DuckDBPyConnection, *, team: str | list[str] | None = None,
               start: datetime | None = None, end: datetime | None = None) -> pl.DataFrame:
    """Daily cost by provider, team and service; `gpu_cost` is the GPU instances' share."""
    where, params = _filters(team, start, end)
    return _frame(con, f"""
        SELECT date_trunc('day', c."ChargePeriodStart") AS day, c."ProviderName" AS provider,
               c."x_Team" AS team, c."ServiceName" AS service,
               sum(c."BilledCost") AS billed_cost, sum(c."EffectiveCost") AS effective_cost,
               sum(c."EffectiveCost") FILTER (WHERE {GPU_USAGE}) AS gpu_cost
        FROM cost_line_items c WHERE {where}
        GROUP BY ALL ORDER BY day, provider, team, service""", params)


def cost_totals(con: duckdb.DuckDBPyConnection, *, team: str | list[str] | None = None,
                start: datetime | None = None, end: datetime | None = None) -> pl.DataFrame:
    """Totals per provider: billed, effective, GPU share, line items and the time span covered."""
    where, params = _filters(team, start, end)
    return _frame(con, f"""
        SELECT c."ProviderName" AS provider, count(*) AS line_items,
               sum(c."BilledCost") AS billed_cost, sum(c."EffectiveCost") AS effective_cost,
               coalesce(sum(c."EffectiveCost") FILTER (WHERE {GPU_USAGE}), 0) AS gpu_cost,
               min(c."ChargePeriodStart") AS first_charge, max(c."ChargePeriodEnd") AS last_charge
        FROM cost_line_items c WHERE {where} GROUP BY ALL ORDER BY provider""", params)


def gpu_resource_hours(con: duckdb.DuckDBPyConnection, *, team: str | list[str] | None = None,
                       start: datetime | None = None, end: datetime | None = None) -> pl.DataFrame:
    """One row per billed GPU resource-hour with its cost and the utilisation measured in it.

    Cost is the resource's GPU usage lines in that hour (EffectiveCost, amortised). Utilisation
    columns are NULL where no metrics arrived for the hour: a gap is unknown, not idle.
    """
    where, params = _filters(team, start, end)
    util_where, util_params = _filters(None, start, end, time_col="hour")  # only the window's metrics
    return _frame(con, f"""
        WITH cost AS (
            SELECT c."ResourceId" AS resource_id, date_trunc('hour', c."ChargePeriodStart") AS hour,
                   any_value(c."ProviderName") AS provider, any_value(c."x_Team") AS team,
                   any_value(c."RegionId") AS region, any_value(c."x_InstanceType") AS instance_type,
                   any_value(c."x_GpuModel") AS gpu_model, max(c."x_GpuCount") AS gpu_count,
                   any_value(c."PricingCategory") AS pricing_category,
                   sum(c."EffectiveCost") AS effective_cost
            FROM cost_line_items c
            WHERE c."ChargeCategory" = 'Usage' AND c."ResourceId" IS NOT NULL AND {GPU_USAGE} AND {where}
            GROUP BY 1, 2),
        util AS (
            SELECT resource_id, hour, count(DISTINCT gpu_uuid) AS gpus_reporting,
                   max(util_max) AS util_max, avg(util_mean) AS util_mean, max(util_p95) AS util_p95,
                   max(mem_used_max_mib) AS mem_used_max_mib, max(mem_total_mib) AS mem_total_mib,
                   avg(sm_active_mean) AS sm_active_mean, avg(tensor_active_mean) AS tensor_active_mean,
                   sum(power_mean_w) AS power_w, string_agg(DISTINCT team, ',' ORDER BY team) AS metric_teams
            FROM gpu_metrics_hourly WHERE resource_id IS NOT NULL AND {util_where} GROUP BY 1, 2)
        SELECT cost.*, util.gpus_reporting, util.util_max, util.util_mean, util.util_p95,
               util.mem_used_max_mib, util.mem_total_mib, util.sm_active_mean, util.tensor_active_mean,
               util.power_w, util.metric_teams
        FROM cost LEFT JOIN util USING (resource_id, hour)
        ORDER BY resource_id, hour""", params + util_params)


def unattributed_gpu_hours(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """GPU-hours measured on hosts that no billed resource claims (fix the resource_map)."""
    return _frame(con, """
        SELECT source, host, count(*) AS gpu_hours, count(DISTINCT gpu_uuid) AS gpus,
               min(hour) AS first_hour, max(hour) AS last_hour
        FROM gpu_metrics_hourly WHERE resource_id IS NULL GROUP BY source, host ORDER BY gpu_hours DESC, source, host""")


def gpu_hours_attribution(con: duckdb.DuckDBPyConnection, *, start: datetime | None = None,
                          end: datetime | None = None) -> pl.DataFrame:
    """Per metrics source: GPU-hours measured, how many were matched to a billed resource and a team,
    and the unattributed share (0–1). A MIG slice's hour counts as one GPU-hour of its slice."""
    where, params = _filters(None, start, end, time_col="hour")
    return _frame(con, f"""
        SELECT source, count(*) AS gpu_hours,
               count(*) FILTER (WHERE resource_id IS NOT NULL) AS attributed_gpu_hours,
               count(*) FILTER (WHERE resource_id IS NULL) AS unattributed_gpu_hours,
               count(*) FILTER (WHERE team IS NOT NULL) AS team_gpu_hours,
               count(*) FILTER (WHERE resource_id IS NULL) / count(*) AS unattributed_share
        FROM gpu_metrics_hourly WHERE {where} GROUP BY source ORDER BY source""", params)


def ingest_status(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Each source's latest run, its last success and the data's freshness."""
    return _frame(con, """
        WITH ranked AS (
            SELECT *, row_number() OVER (PARTITION BY source ORDER BY started_at DESC) AS rn
            FROM ingest_runs)
        SELECT r.source, r.source_type, r.status AS last_status, r.started_at AS last_started_at,
               r.finished_at AS last_finished_at, r.rows AS last_rows, r.error AS last_error,
               (SELECT max(finished_at) FROM ingest_runs s WHERE s.source = r.source AND s.status = 'succeeded')
                   AS last_success_at,
               (SELECT any_value(watermark ORDER BY started_at DESC) FROM ingest_runs s
                WHERE s.source = r.source AND s.watermark IS NOT NULL) AS watermark
        FROM ranked r WHERE rn = 1 ORDER BY source""")


def recommendations(con: duckdb.DuckDBPyConnection, *, kind: str | None = None,
                    team: str | list[str] | None = None, status: str | None = None) -> pl.DataFrame:
    clauses, params = ["TRUE"], []
    if kind:
        clauses.append("kind = ?")
        params.append(kind)
    if status:
        clauses.append("status = ?")
        params.append(status)
    where_team, team_params = _filters(team, None, None, team_col="team")
    return _frame(con, f"""
        SELECT * FROM recommendations WHERE {' AND '.join(clauses)} AND {where_team}
        ORDER BY monthly_savings_usd DESC, id""", params + team_params)
