"""Every query the models, the dashboard, the report and the API share.

Plain functions ``(con, filters) -> polars.DataFrame``: the heavy scans, rollups and joins run in
DuckDB SQL and hand their (small) result to polars through Arrow. Filters are bound parameters;
no caller's text is ever pasted into SQL.
"""

from __future__ import annotations

from datetime import datetime

import duckdb
import polars as pl

from warehouse import reference

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
                   any_value(c."x_GpuModel") AS gpu_model,
                   -- an on-prem node bills one line set per GPU (ResourceName node/gpuN, x_GpuCount 1)
                   greatest(max(c."x_GpuCount"), count(DISTINCT c."ResourceName")
                            FILTER (WHERE c."ProviderName" = 'onprem')) AS gpu_count,
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


def unattributed_gpu_hours(con: duckdb.DuckDBPyConnection, *, start: datetime | None = None,
                           end: datetime | None = None) -> pl.DataFrame:
    """GPU-hours that no team can be charged for, per source and host: ``missing`` says whether no billed
    resource claims them (fix the resource_map, or the bill has not arrived) or the resource has no team
    (tag it, or map its namespace). The fleet page's "(unattributed)" row is exactly these hours."""
    where, params = _filters(None, start, end, time_col="hour")
    return _frame(con, f"""
        SELECT source, host, CASE WHEN resource_id IS NULL THEN 'billed resource' ELSE 'team' END AS missing,
               any_value(resource_id) AS resource_id, count(*) AS gpu_hours, count(DISTINCT gpu_uuid) AS gpus,
               min(hour) AS first_hour, max(hour) AS last_hour
        FROM gpu_metrics_hourly WHERE (resource_id IS NULL OR team IS NULL) AND {where}
        GROUP BY source, host, missing ORDER BY gpu_hours DESC, source, host""", params)


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


def gpu_count_disagreements(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Resources whose metrics report a different number of GPUs than their instance type holds.

    Expected: the catalogue's count, else the bill's ``x_GpuCount``, else the inventory's (on-prem: the
    node's per-GPU lines). Measured: the most distinct whole GPUs reporting in one hour. Neither is
    preferred silently: a node reporting more GPUs than its type has is mis-attributed metrics, one
    reporting fewer has GPUs without an exporter (gpu_count withholds it).
    """
    return _frame(con, f"""
        WITH billed AS (
            SELECT c."ResourceId" AS resource_id, any_value(c."ProviderName") AS provider,
                   any_value(c."x_InstanceType") AS instance_type, max(c."x_GpuCount") AS bill_gpus,
                   count(DISTINCT c."ResourceName") FILTER (WHERE c."ProviderName" = 'onprem') AS onprem_gpus
            FROM cost_line_items c
            WHERE c."ChargeCategory" = 'Usage' AND c."ResourceId" IS NOT NULL AND {GPU_USAGE} GROUP BY 1),
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
        ORDER BY e.resource_id""")


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


def withheld_findings(con: duckdb.DuckDBPyConnection, *, kind: str | None = None,
                      team: str | list[str] | None = None) -> pl.DataFrame:
    """What the last model run withheld: per resource and kind, the reason, the missing fact and the
    source that would provide it. A finding with no team (fleet-wide, or not yet attributed) is
    shown to a viewer of every team only, like a recommendation without one."""
    where_team, params = _filters(team, None, None, team_col="team")
    kind_clause = "kind = ?" if kind else "TRUE"
    return _frame(con, f"""
        SELECT kind, team, provider, resource_id, reason, detail, missing, source_hint, model_version, created_at
        FROM withheld_findings WHERE {kind_clause} AND {where_team}
        ORDER BY reason, kind, resource_id""", ([kind] if kind else []) + params)


def onprem_comparison(con: duckdb.DuckDBPyConnection, *, team: str | list[str] | None = None) -> pl.DataFrame:
    """The last model run's on-prem verdict per node group and workload (keep, shrink, burst) with its
    figures: facts, not recommendations. A group's cluster-wide row (no team) is for every-team viewers."""
    where_team, params = _filters(team, None, None, team_col="team")
    return _frame(con, f"""
        SELECT resource_id AS node_group, team, workload, pattern, action, monthly_savings_usd,
               CAST(json_extract(evidence, '$.util_mean_pct') AS DOUBLE) AS util_mean_pct,
               CAST(json_extract(evidence, '$.break_even_utilisation_pct') AS DOUBLE) AS break_even_utilisation_pct,
               CAST(json_extract(evidence, '$.onprem_cost_per_used_gpu_hour_usd') AS DOUBLE) AS onprem_usd_per_used_gpu_hour,
               CAST(json_extract(evidence, '$.cloud_cost_per_used_gpu_hour_usd') AS DOUBLE) AS cloud_usd_per_used_gpu_hour,
               json_extract_string(evidence, '$.cheapest_cloud_option') AS cheapest_cloud_option,
               CAST(json_extract(evidence, '$.gpu_hours') AS BIGINT) AS gpu_hours, created_at
        FROM onprem_comparison WHERE {where_team}
        ORDER BY node_group, team NULLS FIRST, workload""", params)


def withheld_counts(con: duckdb.DuckDBPyConnection, *, team: str | list[str] | None = None) -> pl.DataFrame:
    """How many findings the last model run withheld, per reason (largest first)."""
    where_team, params = _filters(team, None, None, team_col="team")
    return _frame(con, f"""
        SELECT reason, count(*) AS findings, string_agg(DISTINCT kind, ', ' ORDER BY kind) AS kinds
        FROM withheld_findings WHERE {where_team} GROUP BY reason ORDER BY findings DESC, reason""", params)


# dashboard: the pages' queries (dashboard/pages/*). Team filters go through `_filters`; every value
# is a bound parameter. Money stays DECIMAL here; the pages cast to float for charts only.

def latest_charge_day(con: duckdb.DuckDBPyConnection, *, team: str | list[str] | None = None) -> datetime | None:
    """The last day with cost data in scope: "this month" on the dashboard is that day's month
    (from the ``cost_daily`` rollup the cost loads keep, and the team's share of shared GPUs)."""
    where, params = _filters(team, None, None, team_col="d.team")
    where_alloc, alloc_params = _filters(team, None, None, team_col="a.team")
    rows = con.execute(f'SELECT greatest((SELECT max(d.last_charge) FROM cost_daily d WHERE {where}), '
                       f'(SELECT max(a.hour) FROM gpu_allocation_hourly a WHERE {where_alloc}))',
                       params + alloc_params).fetchall()
    latest = rows[0][0]
    return latest.replace(hour=0, minute=0, second=0, microsecond=0) if latest is not None else None


def spend_daily(con: duckdb.DuckDBPyConnection, *, team: str | list[str] | None = None,
                start: datetime | None = None, end: datetime | None = None) -> pl.DataFrame:
    """Daily EffectiveCost (and its GPU share) by provider, team and service: the columns of
    ``cost_daily`` the dashboard draws, read from the ``cost_daily`` rollup table (UTC days, kept by
    every cost load) rather than the line items. ``start``/``end`` are UTC day boundaries."""
    where, params = _filters(team, start, end, team_col="d.team", time_col="d.day")
    return _frame(con, f"""
        SELECT d.day, d.provider, d.team, d.service, sum(d.effective_cost) AS effective_cost,
               sum(d.gpu_cost) AS gpu_cost
        FROM cost_daily d WHERE {where} GROUP BY ALL ORDER BY day, provider, team, service""", params)


def cost_teams(con: duckdb.DuckDBPyConnection, *, team: str | list[str] | None = None) -> list[str]:
    """The teams that have cost lines or a share of shared GPUs (within ``team`` when given), for the
    dashboard's team picker."""
    where, params = _filters(team, None, None, team_col="d.team")
    where_alloc, alloc_params = _filters(team, None, None, team_col="a.team")
    rows = con.execute(f'SELECT DISTINCT d.team FROM cost_daily d WHERE {where} AND d.team IS NOT NULL '
                       f'UNION SELECT DISTINCT a.team FROM gpu_allocation_hourly a WHERE {where_alloc} '
                       'AND a.team IS NOT NULL ORDER BY 1', params + alloc_params).fetchall()
    return [r[0] for r in rows]


def dashboard_data_version(con: duckdb.DuckDBPyConnection) -> tuple:
    """A cheap fingerprint of what the dashboard shows (the ledgers, findings and decisions, not the
    fact tables): when it is unchanged, a result computed from the warehouse is still current."""
    rows = con.execute("""
        SELECT (SELECT max(coalesce(finished_at, started_at)) FROM ingest_runs),
               (SELECT count(*) FROM ingest_runs),
               (SELECT max(coalesce(finished_at, started_at)) FROM job_runs),
               (SELECT count(*) FROM recommendations), (SELECT max(created_at) FROM recommendations),
               (SELECT count(*) FROM decisions), (SELECT max(decided_at) FROM decisions)""").fetchall()
    return tuple(str(v) for v in rows[0])


def cost_data_version(con: duckdb.DuckDBPyConnection) -> tuple:
    """The fingerprint of what cost figures (spend, the forecast, anomalies) depend on: the ingest
    ledger only, so a decision or a model run does not make the dashboard refit the forecast."""
    rows = con.execute("SELECT max(coalesce(finished_at, started_at)), count(*) FROM ingest_runs").fetchall()
    return tuple(str(v) for v in rows[0])


def savings_by_status(con: duckdb.DuckDBPyConnection, *, team: str | list[str] | None = None) -> pl.DataFrame:
    """Every recommendation's status, plan role and monthly savings (open = identified, accepted,
    applied = realised): totals over them are ``models.plans.total`` (primary and step objects only)."""
    where, params = _filters(team, None, None, team_col="team")
    return _frame(con, f"""
        SELECT status, plan, plan_id, kind, monthly_savings_usd
        FROM recommendations WHERE {where} ORDER BY status, plan_id, plan""", params)


def dashboard_recommendation(con: duckdb.DuckDBPyConnection, recommendation_id: str, *,
                             team: str | list[str] | None = None) -> pl.DataFrame:
    """One recommendation, or none when it does not exist or lies outside the caller's teams."""
    where, params = _filters(team, None, None, team_col="team")
    return _frame(con, f"SELECT * FROM recommendations WHERE id = ? AND {where}", [recommendation_id] + params)


def decisions_log(con: duckdb.DuckDBPyConnection, *, team: str | list[str] | None = None,
                  recommendation_id: str | None = None) -> pl.DataFrame:
    """Who decided what on which recommendation, newest first (scoped by the recommendation's team)."""
    where, params = _filters(team, None, None, team_col="r.team")
    if recommendation_id is not None:
        where += " AND d.recommendation_id = ?"
        params.append(recommendation_id)
    return _frame(con, f"""
        SELECT d.decided_at, d.recommendation_id, r.kind, r.team, d.decision, d.reason, d.actor
        FROM decisions d JOIN recommendations r ON r.id = d.recommendation_id
        WHERE {where} ORDER BY d.decided_at DESC""", params)


def resource_utilisation(con: duckdb.DuckDBPyConnection, resource_id: str, *, start: datetime | None = None,
                         end: datetime | None = None) -> pl.DataFrame:
    """Hourly utilisation and memory of one billed resource (a recommendation's evidence chart).
    Callers take ``resource_id`` from a recommendation already read through their team scope."""
    where, params = _filters(None, start, end, time_col="hour")
    return _frame(con, f"""
        SELECT hour, any_value(gpu_model) AS gpu_model, count(DISTINCT gpu_uuid) AS gpus,
               avg(util_mean) AS util_mean, max(util_max) AS util_max,
               max(mem_used_max_mib) / 1024.0 AS mem_used_max_gib, max(mem_total_mib) / 1024.0 AS mem_total_gib
        FROM gpu_metrics_hourly WHERE resource_id = ? AND {where} GROUP BY hour ORDER BY hour""",
        [resource_id] + params)


def gpu_memory_gib(con: duckdb.DuckDBPyConnection, gpu_models: list[str]) -> pl.DataFrame:
    """Memory per GPU model from the reference specs (a proposed GPU's capacity line)."""
    return _frame(con, "SELECT gpu_model, memory_gib FROM gpu_specs WHERE gpu_model IN (SELECT unnest(?::VARCHAR[]))",
                  [list(gpu_models)])


def fleet_utilisation(con: duckdb.DuckDBPyConnection, *, team: str | list[str] | None = None,
                      start: datetime | None = None, end: datetime | None = None) -> pl.DataFrame:
    """Per team × GPU model: GPU-hours measured and their mean / p95 utilisation (the fleet heatmap)."""
    where, params = _filters(team, start, end, team_col="team", time_col="hour")
    return _frame(con, f"""
        SELECT coalesce(team, '(unattributed)') AS team, gpu_model, count(*) AS gpu_hours,
               avg(util_mean) AS util_mean, avg(util_p95) AS util_p95
        FROM gpu_metrics_hourly WHERE {where} GROUP BY ALL ORDER BY team, gpu_model""", params)


def idle_gpu_cost(con: duckdb.DuckDBPyConnection, *, team: str | list[str] | None = None,
                  start: datetime | None = None, end: datetime | None = None,
                  idle_util_pct: float = 5.0) -> pl.DataFrame:
    """Per team × GPU model: GPU cost in the window, and the billed GPU resource-hours that were idle
    (measured peak utilisation under ``idle_util_pct``), their GPU-hours and their cost. Hours
    without metrics are not idle. The idle hours are found in the (small) metrics table first and
    only the cost lines of those hours are grouped per resource-hour."""
    where, params = _filters(team, start, end)
    util_where, util_params = _filters(None, start, end, time_col="hour")
    day_where, day_params = _filters(team, start, end, team_col="d.team", time_col="d.day")
    return _frame(con, f"""
        WITH idle AS (
            SELECT resource_id, epoch_us(hour) // 3600000000 AS hour_n FROM gpu_metrics_hourly
            WHERE resource_id IS NOT NULL AND {util_where} GROUP BY 1, 2 HAVING max(util_max) < ?),
        lines AS (
            SELECT c."x_Team" AS team, c."x_GpuModel" AS gpu_model, c."ResourceId" AS resource_id,
                   epoch_us(c."ChargePeriodStart") // 3600000000 AS hour_n, c."x_GpuCount" AS gpu_count,
                   c."EffectiveCost" AS effective_cost
            FROM cost_line_items c
            WHERE c."ChargeCategory" = 'Usage' AND c."ResourceId" IS NOT NULL AND {GPU_USAGE} AND {where}),
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
        ORDER BY idle_cost DESC, t.team, t.gpu_model""", util_params + [idle_util_pct] + params + day_params)


def spot_series(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Which (provider, region, instance type) have spot price history, and how many points."""
    return _frame(con, """
        SELECT provider, region, instance_type, count(*) AS points, min(ts) AS first_ts, max(ts) AS last_ts
        FROM spot_prices GROUP BY ALL ORDER BY provider, instance_type, region""")


def spot_price_history(con: duckdb.DuckDBPyConnection, provider: str, instance_type: str,
                       region: str | None = None) -> pl.DataFrame:
    """Spot price points of one instance type (every region unless one is named), with the on-demand
    price of the same type and region (the instance catalogue, else the latest USD on-demand price
    in ``price_history``) for comparison."""
    clauses, params = ["s.provider = ?", "s.instance_type = ?"], [provider, instance_type]
    if region is not None:
        clauses.append("s.region = ?")
        params.append(region)
    return _frame(con, f"""
        WITH od_all AS (
            SELECT provider, region, instance_type, max(on_demand_usd_per_hour) AS on_demand_usd
            FROM instance_types GROUP BY ALL
            UNION ALL
            SELECT provider, region, instance_type, arg_max(price, effective_from) AS on_demand_usd
            FROM price_history WHERE pricing = 'on_demand' AND currency = 'USD' GROUP BY ALL),
        od AS (SELECT provider, region, instance_type, max(on_demand_usd) AS on_demand_usd FROM od_all GROUP BY ALL)
        SELECT s.ts, s.region, s.zone, s.price_usd, od.on_demand_usd
        FROM spot_prices s LEFT JOIN od USING (provider, region, instance_type)
        WHERE {' AND '.join(clauses)} ORDER BY s.ts, s.region, s.zone""", params)


def spot_interruption(con: duckdb.DuckDBPyConnection, *, instance_type: str | None = None) -> pl.DataFrame:
    """The latest interruption-frequency band and spot saving per instance type and region."""
    where, params = "TRUE", []
    if instance_type is not None:
        where, params = "instance_type = ?", [instance_type]
    return _frame(con, f"""
        SELECT provider, region, instance_type, arg_max(band_label, updated_at) AS band_label,
               arg_max(band_index, updated_at) AS band_index, arg_max(savings_pct, updated_at) AS savings_pct
        FROM spot_interruption_bands WHERE {where} GROUP BY ALL ORDER BY instance_type, region""", params)


def job_status(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Each non-ingest job's latest run (recommend, report, feed push) and its last success."""
    return _frame(con, """
        SELECT job, arg_max(status, started_at) AS last_status, max(started_at) AS last_started_at,
               arg_max(error, started_at) AS last_error,
               max(finished_at) FILTER (WHERE status = 'succeeded') AS last_success_at
        FROM job_runs GROUP BY job ORDER BY job""")


# models: forecast

def daily_cost_series(con: duckdb.DuckDBPyConnection, *, teams: list[str] | None = None,
                      start: datetime | None = None, end: datetime | None = None) -> pl.DataFrame:
    """Daily EffectiveCost per (team, provider): the series the cost forecast and anomalies fit.
    ``complete_until``: the latest end of any line of a day or less (the data's edge, same on every row)."""
    where, params = _filters(teams, start, end)
    return _frame(con, f"""
        SELECT CAST(timezone('UTC', c."ChargePeriodStart") AS DATE) AS day, c."x_Team" AS team,
               c."ProviderName" AS provider_name, CAST(sum(c."EffectiveCost") AS DOUBLE) AS cost_usd,
               max(max(c."ChargePeriodEnd") FILTER (
                   WHERE c."ChargePeriodEnd" - c."ChargePeriodStart" <= INTERVAL 1 DAY)) OVER () AS complete_until
        FROM cost_line_items c WHERE {where}
        GROUP BY ALL ORDER BY team, provider_name, day""", params)


def daily_cost_by_line_item(con: duckdb.DuckDBPyConnection, *, teams: list[str] | None = None,
                            start: datetime | None = None, end: datetime | None = None) -> pl.DataFrame:
    """Daily EffectiveCost per (team, provider, resource, service, SKU, charge description): what an
    anomaly is explained with."""
    where, params = _filters(teams, start, end)
    return _frame(con, f"""
        SELECT CAST(timezone('UTC', c."ChargePeriodStart") AS DATE) AS day, c."x_Team" AS team,
               c."ProviderName" AS provider_name, c."ResourceId" AS resource_id, c."ServiceName" AS service,
               c."SkuId" AS sku_id, c."ChargeDescription" AS charge_description,
               CAST(sum(c."EffectiveCost") AS DOUBLE) AS cost_usd
        FROM cost_line_items c WHERE {where}
        GROUP BY ALL ORDER BY team, provider_name, day""", params)


# --- scheduler feed: the HTTP API, `gpufinops export` and the webhook push (jobs/api.py, jobs/export/, jobs/webhook.py)

def recommendation_by_id(con: duckdb.DuckDBPyConnection, recommendation_id: str) -> pl.DataFrame:
    """One stored recommendation (zero rows when there is none); the caller applies its scope."""
    return _frame(con, "SELECT * FROM recommendations WHERE id = ?", [recommendation_id])


def undelivered_recommendations(con: duckdb.DuckDBPyConnection, url: str, *,
                                team: str | list[str] | None = None,
                                kinds: list[str] | None = None) -> pl.DataFrame:
    """Recommendations a webhook at ``url`` has not yet received (no delivered batch holds their id);
    dismissed ones are never pushed. Oldest first, so batches follow the order findings appeared."""
    where_team, team_params = _filters(team, None, None, team_col="r.team")
    kind_clause, kind_params = ("TRUE", [])
    if kinds:
        kind_clause, kind_params = "r.kind IN (SELECT unnest(?::VARCHAR[]))", [list(kinds)]
    return _frame(con, f"""
        WITH delivered AS (
            SELECT DISTINCT unnest(from_json(d.recommendation_ids, '["VARCHAR"]')) AS id
            FROM webhook_deliveries d WHERE d.url = ? AND d.status = 'delivered')
        SELECT r.* FROM recommendations r
        WHERE r.status <> 'dismissed' AND r.id NOT IN (SELECT id FROM delivered)
          AND {kind_clause} AND {where_team}
        ORDER BY r.created_at, r.id""", [url] + kind_params + team_params)


def team_gpu_capacity(con: duckdb.DuckDBPyConnection, *, team: str | list[str] | None = None,
                      days: int = 14) -> pl.DataFrame:
    """Per (team, provider, GPU model): the peak number of GPUs billed at the same hour over the last
    ``days`` days of data, of them on spot (PricingCategory 'Dynamic'), and the instance types seen.
    The window ends at the newest charge, not at now, so an export of older data stays meaningful."""
    where, params = _filters(team, None, None)
    return _frame(con, f"""
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
        ORDER BY h.team, h.provider_name, h.gpu_model""", [days] + params)


# report (the weekly e-mailed report: jobs/report/render.py)

def report_spend_daily(con: duckdb.DuckDBPyConnection, *, team: str | list[str] | None = None,
                       start: datetime | None = None, end: datetime | None = None,
                       tz: str = "UTC") -> pl.DataFrame:
    """Daily spend by provider and team, days counted in the report's time zone ``tz``."""
    where, params = _filters(team, start, end)
    return _frame(con, f"""
        SELECT CAST(timezone(?, c."ChargePeriodStart") AS DATE) AS day, c."ProviderName" AS provider,
               c."x_Team" AS team, sum(c."EffectiveCost") AS effective_cost,
               coalesce(sum(c."EffectiveCost") FILTER (WHERE {GPU_USAGE}), 0) AS gpu_cost
        FROM cost_line_items c WHERE {where}
        GROUP BY ALL ORDER BY day, provider, team""", [tz] + params)


def report_delivery_status(con: duckdb.DuckDBPyConnection, report: str, week: str) -> pl.DataFrame:
    """The delivery ledger of one report and week: one row per recipient."""
    return _frame(con, """
        SELECT recipient, status, attempts, message_id, sent_at, error, updated_at
        FROM report_deliveries WHERE report = ? AND week = ? ORDER BY recipient""", [report, week])


# models: rightsizing

_RIGHTSIZING_COST = f"""
    SELECT c."ResourceId" AS resource_id, date_trunc('hour', c."ChargePeriodStart") AS hour,
           any_value(c."ProviderName") AS provider, any_value(c."x_Team") AS team,
           any_value(c."RegionId") AS region, any_value(c."x_InstanceType") AS instance_type,
           any_value(c."x_GpuModel") AS gpu_model, max(c."x_GpuCount") AS gpu_count,
           any_value(c."PricingCategory") AS pricing_category, any_value(CAST(c."Tags" AS VARCHAR)) AS tags,
           sum(c."EffectiveCost") AS effective_cost
    FROM cost_line_items c
    WHERE c."ChargeCategory" = 'Usage' AND c."ResourceId" IS NOT NULL AND {GPU_USAGE} AND c."ChargePeriodStart" >= ?
    GROUP BY 1, 2"""


def rightsizing_resources(con: duckdb.DuckDBPyConnection, start: datetime) -> pl.DataFrame:
    """Per billed GPU resource since ``start``: its cost, billed and measured hours, and the spread of
    its hourly utilisation (the busiest GPU's p95 in each hour) as quantiles, peak memory, SM/tensor
    activity. The rightsizing models (gpu_type, quantization) read this; one row per resource."""
    return _frame(con, f"""
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
        GROUP BY cost.resource_id ORDER BY cost.resource_id""", [start, start])


def rightsizing_gpus(con: duckdb.DuckDBPyConnection, start: datetime) -> pl.DataFrame:
    """Per GPU of each billed GPU resource since ``start``: hours measured, the p95 of its hourly p95
    utilisation, its peak memory. gpu_count reads this to count the GPUs a resource keeps busy."""
    return _frame(con, f"""
        WITH billed AS (SELECT DISTINCT resource_id FROM ({_RIGHTSIZING_COST}))
        SELECT m.resource_id, m.gpu_uuid, count(*) AS measured_hours,
               quantile_cont(m.util_p95, 0.95) AS util_p95, max(m.util_max) AS util_max,
               avg(m.util_mean) AS util_mean, max(m.mem_used_max_mib) AS mem_used_max_mib,
               max(m.mem_total_mib) AS mem_total_mib
        FROM gpu_metrics_hourly m JOIN billed USING (resource_id)
        WHERE m.hour >= ? GROUP BY 1, 2 ORDER BY 1, 2""", [start, start])


def rightsizing_catalogue(con: duckdb.DuckDBPyConnection, *, reference: bool = False) -> pl.DataFrame:
    """What can be bought where: the ``instance_types`` catalogue, completed by the GPU instance types
    the bills themselves show on offer in a region, each with its GPU's memory and throughput from
    ``gpu_specs``. A billed type's hourly price is the median over its on-demand resource-hours of the
    hour's summed ListCost (GCP bills GPU, vCPU and RAM as separate SKU lines; AWS one line). A
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
    return _frame(con, f"""
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
                   max(gpu_count) AS gpu_count, median(list_cost) AS on_demand_usd_per_hour
            FROM hours WHERE list_cost > 0 GROUP BY 1, 2, 3),
        offers AS (
            SELECT provider, region, instance_type, gpu_model, gpu_count,
                   CAST(on_demand_usd_per_hour AS DECIMAL(38, 15)) AS on_demand_usd_per_hour, 'catalogue' AS origin
            FROM instance_types WHERE gpu_count > 0 AND on_demand_usd_per_hour > 0
            UNION ALL BY NAME
            SELECT CASE WHEN provider_name LIKE '%amazon%' OR provider_name LIKE 'aws%' THEN 'aws'
                        WHEN provider_name LIKE '%google%' THEN 'gcp' ELSE provider_name END AS provider,
                   region, instance_type, gpu_model, gpu_count,
                   CAST(on_demand_usd_per_hour AS DECIMAL(38, 15)) AS on_demand_usd_per_hour, 'billed' AS origin
            FROM billed b WHERE NOT EXISTS (SELECT 1 FROM instance_types i WHERE i.region = b.region
                                            AND i.instance_type = b.instance_type AND i.on_demand_usd_per_hour > 0)
            {extra})
        SELECT o.*, s.memory_gib, s.memory_bandwidth_gbps, s.fp32_tflops, s.fp16_tflops, s.bf16_tflops, s.int8_tops
        FROM offers o LEFT JOIN gpu_specs s USING (gpu_model)
        ORDER BY provider, region, on_demand_usd_per_hour, instance_type""")


def reference_prices_table():
    """The shipped us-east-1 on-demand list (warehouse/data/aws_ondemand_karpenter.csv) as Arrow."""
    import pyarrow.csv as pacsv
    return pacsv.read_csv(reference.KARPENTER_PRICES_PATH, convert_options=pacsv.ConvertOptions(
        column_types={"region": "string", "instance_type": "string", "ondemand_usd_per_hour": "string"}))


# models: spot forecast

def spot_price_changes(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Spot and on-demand $/h of each (provider, region, instance type) at every point either
    changed: from `price_history` (spot / on_demand rows) and, for AWS, `spot_prices` (per-zone
    points averaged per region and day) against `instance_types`' on-demand price."""
    return _frame(con, """
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
        ORDER BY provider, region, instance_type, ts""")


# models: onprem_vs_cloud (models/onprem_vs_cloud.py)

def onprem_gpu_usage(con: duckdb.DuckDBPyConnection, *, start: datetime | None = None,
                     end: datetime | None = None) -> pl.DataFrame:
    """Per on-prem (cluster, node group, team, workload): GPU-hours, the utilisation measured in them
    (``util_pct_sum`` over ``measured_gpu_hours``, exact DECIMAL), cost by component, the cost-model
    figures the ``onprem`` source priced them with (from the energy lines' Tags), how the power was
    known, and the spread of the hourly mean utilisation (p95, share of hours at 90 % or more)."""
    where, params = _filters(None, start, end)
    return _frame(con, f"""
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
        ORDER BY t.cluster, t.node_group, t.team, t.workload""", params)


def cloud_gpu_offers(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Every cloud price for a GPU machine: (provider, region, instance type, pricing = on_demand |
    spot | commit_1y | commit_3y, $/h, origin) with its GPU model, count and the GPU's memory and
    FP16 throughput. From the catalogues (``instance_types`` on-demand, the latest ``price_history``
    row per pricing, ``spot_prices`` averaged over their last 30 days) and, where a catalogue has no
    price, what the bills show (the hourly list price; the spot rate actually paid). A price in another
    currency than USD is left out."""
    return _frame(con, f"""
        WITH it AS (
            SELECT provider, region, instance_type, any_value(gpu_model) AS gpu_model, max(gpu_count) AS gpu_count
            FROM instance_types WHERE gpu_count > 0 GROUP BY ALL),
        billed AS (
            SELECT CASE WHEN lower(c."ProviderName") LIKE '%amazon%' OR lower(c."ProviderName") LIKE 'aws%' THEN 'aws'
                        WHEN lower(c."ProviderName") LIKE '%google%' THEN 'gcp' ELSE lower(c."ProviderName") END AS provider,
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
        ORDER BY r.provider, r.region, r.instance_type, r.pricing""")


# models: spot mix

def spot_mix_usage(con: duckdb.DuckDBPyConnection, *, start: datetime | None = None) -> pl.DataFrame:
    """Per GPU resource billed only on-demand since ``start``: hours, cost, tags, and its runs (the
    longest stretch of consecutive billed hours is the job length an interruption can waste)."""
    where, params = _filters(None, start, None)
    return _frame(con, f"""
        WITH h AS (
            SELECT c."ResourceId" AS resource_id, date_trunc('hour', c."ChargePeriodStart") AS hour,
                   any_value(c."ProviderName") AS provider_name, any_value(c."x_Team") AS team,
                   any_value(c."RegionId") AS region, any_value(c."x_InstanceType") AS instance_type,
                   any_value(c."x_GpuModel") AS gpu_model, max(c."x_GpuCount") AS gpu_count,
                   any_value(c."Tags") AS tags, bool_and(c."PricingCategory" = 'Standard') AS on_demand,
                   CAST(sum(c."EffectiveCost") AS DOUBLE) AS cost_usd, CAST(sum(c."ListCost") AS DOUBLE) AS list_cost_usd
            FROM cost_line_items c
            WHERE c."ChargeCategory" = 'Usage' AND c."ResourceId" IS NOT NULL AND {GPU_USAGE} AND {where}
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
        ORDER BY h.resource_id""", params)


def fleet_spot_ratios(con: duckdb.DuckDBPyConnection, *, start: datetime | None = None) -> pl.DataFrame:
    """What the fleet itself paid for spot: EffectiveCost / ListCost (on-demand list) of the GPU
    spot usage lines per (provider, region, instance type), with the hours behind it."""
    where, params = _filters(None, start, None)
    return _frame(con, f"""
        SELECT c."ProviderName" AS provider_name, c."RegionId" AS region, c."x_InstanceType" AS instance_type,
               CAST(sum(c."EffectiveCost") / sum(c."ListCost") AS DOUBLE) AS spot_ratio,
               count(*) AS spot_hours
        FROM cost_line_items c
        WHERE c."PricingCategory" = 'Dynamic' AND c."ChargeCategory" = 'Usage' AND {GPU_USAGE}
          AND c."ListCost" > 0 AND {where}
        GROUP BY ALL ORDER BY ALL""", params)


def spot_bands(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """The spot advisor's interruption band and typical saving per (provider, region, instance type), Linux."""
    return _frame(con, """
        SELECT provider, region, instance_type, any_value(band_index) AS band_index,
               any_value(band_label) AS band_label, any_value(band_max_pct) AS band_max_pct,
               any_value(savings_pct) AS savings_pct, any_value(source) AS source
        FROM spot_interruption_bands WHERE os IS NULL OR os ILIKE 'linux%'
        GROUP BY ALL ORDER BY ALL""")


# models: commitment

def commitment_prices(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """The latest catalogue price per (provider, region, instance type) for on-demand and 1-/3-year
    commitments, $/h (`price_history`; commitments are stored per hour)."""
    return _frame(con, """
        SELECT provider, region, instance_type,
               CAST(arg_max(price, effective_from) FILTER (WHERE pricing = 'on_demand') AS DOUBLE) AS on_demand_usd,
               CAST(arg_max(price, effective_from) FILTER (WHERE pricing = 'commit_1y') AS DOUBLE) AS commit_1y_usd,
               CAST(arg_max(price, effective_from) FILTER (WHERE pricing = 'commit_3y') AS DOUBLE) AS commit_3y_usd,
               any_value(source) AS source
        FROM price_history WHERE pricing IN ('on_demand', 'commit_1y', 'commit_3y') AND price IS NOT NULL
        GROUP BY ALL ORDER BY ALL""")


def fleet_commitment_ratios(con: duckdb.DuckDBPyConnection, *, start: datetime | None = None) -> pl.DataFrame:
    """What the fleet's own commitments cost against list: EffectiveCost / ListCost of the GPU usage
    lines covered by a commitment, per (provider, region, instance type) and commitment type."""
    where, params = _filters(None, start, None)
    return _frame(con, f"""
        SELECT c."ProviderName" AS provider_name, c."RegionId" AS region, c."x_InstanceType" AS instance_type,
               any_value(c."CommitmentDiscountType") AS commitment_type,
               CAST(sum(c."EffectiveCost") / sum(c."ListCost") AS DOUBLE) AS commit_ratio, count(*) AS hours
        FROM cost_line_items c
        WHERE c."PricingCategory" = 'Committed' AND c."ChargeCategory" = 'Usage' AND {GPU_USAGE}
          AND c."ListCost" > 0 AND {where}
        GROUP BY 1, 2, 3 ORDER BY ALL""", params)


# exports (jobs/export): the fleet per target cluster

def _cluster_tag_sql(column: str = 'c."Tags"') -> str:
    """The first non-empty value of the given tag keys (the query's first parameter, a list)."""
    return (f"list_filter(json_extract_string({column}, list_transform(?::VARCHAR[], lambda k: '$.\"' || k || '\"')), "
            "lambda v: v IS NOT NULL AND v <> '')[1]")


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


def export_gpu_resources(con: duckdb.DuckDBPyConnection, *, tag_keys: list[str] | tuple[str, ...] = (),
                         team: str | list[str] | None = None, days: int = 14) -> pl.DataFrame:
    """Per billed GPU resource over the last ``days`` days of data (the window ends at the newest charge):
    where it runs (provider, region, account, the newest value of the first of ``tag_keys`` it carries),
    its newest instance type, GPU model and team, and its GPUs at its busiest hour (an on-prem node's
    GPUs are its distinct ``ResourceName`` slots), of them on spot."""
    where, params = _filters(team, None, None)
    return _frame(con, f"""
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
        ORDER BY l.resource_id""", [list(tag_keys), days] + params)


def export_gpu_hours(con: duckdb.DuckDBPyConnection, *, team: str | list[str] | None = None,
                     days: int = 14) -> pl.DataFrame:
    """Billed GPUs per (resource, team, GPU model, hour) over the same window as ``export_gpu_resources``
    (an on-prem node's slots may be billed to several teams), of them on spot: the input of the peak
    concurrent GPUs per cluster, team and model."""
    where, params = _filters(team, None, None)
    return _frame(con, f"""
        WITH lines AS ({_EXPORT_LINES.format(tag="NULL", where=where)}),
        units AS (SELECT resource_id, team, gpu_model, hour, unit, max(gpus) AS gpus, bool_or(spot) AS spot
                  FROM lines GROUP BY ALL)
        SELECT resource_id, team, gpu_model, hour, CAST(sum(gpus) AS BIGINT) AS gpus,
               CAST(coalesce(sum(gpus) FILTER (WHERE spot), 0) AS BIGINT) AS spot_gpus
        FROM units GROUP BY ALL ORDER BY ALL""", [days] + params)


def export_onprem_node_groups(con: duckdb.DuckDBPyConnection, *, days: int = 14) -> pl.DataFrame:
    """Per on-prem (cluster, node group) in the newest ``days`` days of its cost lines: its GPU model, nodes,
    GPUs (distinct ``ResourceName`` slots: every configured GPU is billed every hour) and GPUs per node."""
    return _frame(con, """
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
        FROM slots GROUP BY ALL ORDER BY ALL""", [days])


def export_team_namespaces(con: duckdb.DuckDBPyConnection, *, days: int = 14) -> pl.DataFrame:
    """(resource_id, team, namespace): the namespaces a metrics source's ``namespace_teams`` maps to a team
    and whose GPU-hours were measured on the resource in the newest ``days`` days of metrics."""
    return _frame(con, """
        SELECT DISTINCT m.resource_id, r.value AS team, m.namespace
        FROM gpu_metrics_hourly m
        JOIN attribution_rules r ON r.kind = 'namespace_teams' AND r.source = m.source AND r.key = m.namespace
        WHERE m.resource_id IS NOT NULL
          AND m.hour >= (SELECT max(hour) FROM gpu_metrics_hourly) - to_days(CAST(? AS INTEGER))
        ORDER BY ALL""", [days])


def gpu_instance_inventory(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """The shipped GPU instance inventory (``gpu_instance_reference``): GPU model and count per type."""
    return _frame(con, """
        SELECT provider, instance_type, gpu_model, gpu_count, gpu_fraction, gpu_memory_gib
        FROM gpu_instance_reference WHERE accelerator = 'gpu' AND gpu_count > 0 ORDER BY ALL""")
