"""The team views of cost with shared GPUs charged by allocation: one builder, every reader.

A team's cost is what its tags say, except on shared GPU resources (``gpu_allocation_hourly``):
there the GPU cost of each allocated resource-hour leaves the team the bill tags the resource with
(``owner_team``) and goes to the teams whose workloads ran on it, the unallocated remainder to the
owner (or, with ``[allocation] unallocated = "spread"``, to the users). Money moves, none appears
or vanishes: over every team the totals equal the bill's. The dashboard's spend pages, the weekly
report, the API's ``/v1/costs/daily`` and the cost forecast all call :func:`team_spend_daily` /
:func:`report_team_spend_daily`, so a team's total is computed here and nowhere else.

Queries follow ``warehouse.queries``: ``(con, filters) -> polars.DataFrame``, bound parameters,
money DECIMAL.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import duckdb
import polars as pl

from gpufinops.warehouse.queries.fragments import filters as _filters
from gpufinops.warehouse.queries.fragments import frame as _frame

US_PER_DAY = 86_400_000_000


def _team_cost_sql(*, utc: bool, where_base: str, where_alloc: str, where_team: str) -> str:
    """The builder: per day, provider, team and service, the bill by tag, the allocation's moves, the result."""
    if utc:  # UTC days: the cost_daily rollup the cost loads keep (days, not line items)
        base = f"""
        SELECT d.day, d.provider, d.team, d.service, sum(d.billed_cost) AS billed_cost,
               sum(d.effective_cost) AS tagged_cost, sum(d.gpu_cost) AS tagged_gpu_cost
        FROM cost_daily d WHERE {where_base} GROUP BY ALL"""
        alloc_day = f"make_timestamptz(epoch_us(a.hour) // {US_PER_DAY} * {US_PER_DAY})"
    else:  # days in the reader's time zone (bound first parameter): from the line items
        base = f"""
        SELECT CAST(timezone(?, c."ChargePeriodStart") AS DATE) AS day, c."ProviderName" AS provider,
               c."x_Team" AS team, c."ServiceName" AS service, sum(c."BilledCost") AS billed_cost,
               sum(c."EffectiveCost") AS tagged_cost,
               coalesce(sum(c."EffectiveCost") FILTER (WHERE c."x_GpuCount" > 0 OR c."x_GpuModel" IS NOT NULL), 0)
                   AS tagged_gpu_cost
        FROM cost_line_items c WHERE {where_base} GROUP BY ALL"""
        alloc_day = "CAST(timezone(?, a.hour) AS DATE)"
    return f"""
    WITH base AS ({base}),
    alloc AS (
        SELECT {alloc_day} AS day, a.provider, a.team, a.owner_team, a.service, a.basis, a.cost_usd
        FROM gpu_allocation_hourly a WHERE {where_alloc}),
    moves AS (
        SELECT day, provider, team, service, billed_cost, tagged_cost, tagged_gpu_cost,
               CAST(0 AS DECIMAL(38, 15)) AS moved, CAST(0 AS DECIMAL(38, 15)) AS allocated,
               CAST(0 AS DECIMAL(38, 15)) AS unallocated FROM base
        UNION ALL BY NAME
        SELECT day, provider, owner_team AS team, service, -sum(cost_usd) AS moved FROM alloc GROUP BY ALL
        UNION ALL BY NAME
        SELECT day, provider, team, service,
               coalesce(sum(cost_usd) FILTER (WHERE basis <> 'unallocated'), 0) AS allocated,
               coalesce(sum(cost_usd) FILTER (WHERE basis = 'unallocated'), 0) AS unallocated
        FROM alloc GROUP BY ALL)
    SELECT day, provider, team, service,
           coalesce(sum(billed_cost), 0) AS billed_cost, coalesce(sum(tagged_cost), 0) AS tagged_cost,
           coalesce(sum(tagged_cost), 0) + coalesce(sum(moved), 0) + coalesce(sum(allocated), 0)
               + coalesce(sum(unallocated), 0) AS effective_cost,
           coalesce(sum(tagged_gpu_cost), 0) + coalesce(sum(moved), 0) + coalesce(sum(allocated), 0)
               + coalesce(sum(unallocated), 0) AS gpu_cost,
           coalesce(sum(allocated), 0) AS allocated_gpu_cost, coalesce(sum(unallocated), 0) AS unallocated_gpu_cost
    FROM moves WHERE {where_team} GROUP BY ALL ORDER BY day, provider, team, service"""


def team_spend_daily(
    con: duckdb.DuckDBPyConnection,
    *,
    team: str | list[str] | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
) -> pl.DataFrame:
    """Per UTC day, provider, team and service: ``effective_cost`` / ``gpu_cost`` as the team carries
    them (shared GPU resources by allocation), ``allocated_gpu_cost`` (its workloads' share of shared
    GPUs), ``unallocated_gpu_cost`` (idle capacity it carries), and the bill's own ``billed_cost`` /
    ``tagged_cost`` by tag. ``start``/``end`` are UTC day boundaries; ``team`` filters the team that
    carries the cost."""
    where_base, base_params = _filters(None, start, end, time_col="d.day")
    where_alloc, alloc_params = _filters(None, start, end, time_col="a.hour")
    where_team, team_params = _filters(team, None, None, team_col="team")
    sql = _team_cost_sql(utc=True, where_base=where_base, where_alloc=where_alloc, where_team=where_team)
    return _frame(con, sql, base_params + alloc_params + team_params)


def report_team_spend_daily(
    con: duckdb.DuckDBPyConnection,
    *,
    team: str | list[str] | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    tz: str = "UTC",
) -> pl.DataFrame:
    """:func:`team_spend_daily` with days counted in the time zone ``tz`` (the weekly report's)."""
    where_base, base_params = _filters(None, start, end)
    where_alloc, alloc_params = _filters(None, start, end, time_col="a.hour")
    where_team, team_params = _filters(team, None, None, team_col="team")
    sql = _team_cost_sql(utc=False, where_base=where_base, where_alloc=where_alloc, where_team=where_team)
    return _frame(con, sql, [tz] + base_params + [tz] + alloc_params + team_params)


def team_cost_series(
    con: duckdb.DuckDBPyConnection,
    *,
    teams: list[str] | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
) -> pl.DataFrame:
    """Daily cost per (team, provider) as the teams carry it (DOUBLE: the cost forecast's series), UTC days,
    with ``complete_until``: the latest end of any line of a day or less (the data's edge, on every row)."""
    daily = report_team_spend_daily(con, team=teams, start=start, end=end, tz="UTC")
    edge = con.execute(
        'SELECT max("ChargePeriodEnd") FILTER (WHERE "ChargePeriodEnd" - "ChargePeriodStart" '
        "<= INTERVAL 1 DAY) FROM cost_line_items"
    ).fetchall()[0][0]
    schema = pl.Schema(
        {
            "day": pl.Date(),
            "team": pl.Utf8(),
            "provider_name": pl.Utf8(),
            "cost_usd": pl.Float64(),
            "complete_until": pl.Datetime("us", "UTC"),
        }
    )
    if daily.is_empty():
        return pl.DataFrame(schema=schema)
    return (
        daily.group_by("day", "team", "provider")
        .agg(pl.col("effective_cost").sum().cast(pl.Float64).alias("cost_usd"))
        .select("day", "team", pl.col("provider").alias("provider_name"), "cost_usd")
        .with_columns(pl.lit(edge, pl.Datetime("us", "UTC")).alias("complete_until"))
        .sort("team", "provider_name", "day", nulls_last=True)
    )


def allocation_by_workload(
    con: duckdb.DuckDBPyConnection,
    *,
    team: str | list[str] | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
) -> pl.DataFrame:
    """Per team, namespace, pod (or process) and basis: allocated GPU cost and GPU-hours in the window,
    the resources it ran on (the Team page's shared-GPU table)."""
    where, params = _filters(team, start, end, team_col="team", time_col="hour")
    return _frame(
        con,
        f"""
        SELECT team, namespace, coalesce(pod, process) AS workload, basis, sum(cost_usd) AS cost_usd,
               sum(share) AS gpu_hours, count(DISTINCT resource_id) AS resources,
               string_agg(DISTINCT method, ',' ORDER BY method) AS methods
        FROM gpu_allocation_hourly WHERE basis <> 'unallocated' AND {where}
        GROUP BY ALL ORDER BY cost_usd DESC, team, namespace, workload""",
        params,
    )


def unallocated_by_node(
    con: duckdb.DuckDBPyConnection,
    *,
    team: str | list[str] | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
) -> pl.DataFrame:
    """Per team and node (billed resource): the unallocated GPU cost and GPU-hours (idle capacity of
    shared GPUs), next to the node's whole allocated GPU cost."""
    where, params = _filters(team, start, end, team_col="a.team", time_col="a.hour")
    node_where, node_params = _filters(None, start, end, time_col="hour")
    return _frame(
        con,
        f"""
        WITH nodes AS (
            SELECT resource_id, sum(cost_usd) AS node_gpu_cost, any_value(host) AS host
            FROM gpu_allocation_hourly WHERE {node_where} GROUP BY 1)
        SELECT a.team, a.resource_id, any_value(n.host) AS host, any_value(a.provider) AS provider,
               sum(a.cost_usd) AS unallocated_cost, sum(a.share) AS unallocated_gpu_hours,
               any_value(n.node_gpu_cost) AS node_gpu_cost,
               string_agg(DISTINCT a.method, ',' ORDER BY a.method) AS methods
        FROM gpu_allocation_hourly a JOIN nodes n USING (resource_id)
        WHERE a.basis = 'unallocated' AND {where}
        GROUP BY a.team, a.resource_id ORDER BY unallocated_cost DESC, a.team, a.resource_id""",
        node_params + params,
    )


@dataclass(frozen=True)
class HeldIdle:
    """When a pod-hour may count as holding an idle GPU (models/allocated_idle.py's rule before its run
    length): present for ``min_presence`` of the GPU's samples, holding ``min_mem_mib``, the GPU's peak
    utilisation under ``util_below_pct``."""

    util_below_pct: float
    min_mem_mib: float
    min_presence: float


def workload_hours(
    con: duckdb.DuckDBPyConnection,
    *,
    start: datetime | None = None,
    end: datetime | None = None,
    pods_holding_idle: HeldIdle | None = None,
) -> pl.DataFrame:
    """Per pod and GPU (or slice) hour: the pod's presence and the memory it held, the GPU's peak
    utilisation in that hour, the cost allocation charged the pod for it (NULL: not allocated, e.g.
    no bill yet) and how (``basis``: whole, mig, timeslice or mps) and the resource's billing facts (the idle model's allocated-but-idle input).

    ``pods_holding_idle``: only the hours of the pods with at least one hour that meets it (every hour
    of those pods, for their totals and runs). A pod without one can never be an allocated-idle
    finding, and on a 10,000-GPU month the pod-hours of every pod were 7.6 GiB in polars."""
    where, params = _filters(None, start, end, time_col="w.hour")
    kept = "held"
    if pods_holding_idle is not None:
        kept = """(SELECT h.* FROM held h SEMI JOIN (
                      SELECT DISTINCT resource_id, namespace, pod FROM held
                      WHERE samples / gpu_samples >= ? AND coalesce(mem_used_max_mib, 0) >= ? AND gpu_util_max < ?) c
                   ON c.resource_id = h.resource_id AND c.namespace IS NOT DISTINCT FROM h.namespace AND c.pod = h.pod)"""
        rule = pods_holding_idle
        params = [*params, rule.min_presence, rule.min_mem_mib, rule.util_below_pct]
    return _frame(
        con,
        f"""
        WITH alloc AS (
            SELECT hour, resource_id, gpu_uuid, mig_instance, namespace, pod, container,
                   sum(cost_usd) AS cost_usd, any_value(team) AS team, any_value(provider) AS provider,
                   any_value(basis) AS basis
            FROM gpu_allocation_hourly WHERE basis <> 'unallocated' AND pod IS NOT NULL GROUP BY ALL),
        held AS (
            SELECT w.hour, g.resource_id, w.gpu_uuid, w.mig_instance, w.namespace, w.pod, w.container, w.source,
                   w.samples, greatest(coalesce(g.samples, w.samples), w.samples) AS gpu_samples,
                   w.mem_used_max_mib, w.util_mean AS pod_util_mean, g.util_max AS gpu_util_max,
                   g.mem_total_mib, g.gpu_model
            FROM gpu_workloads_hourly w JOIN gpu_metrics_hourly g ON g.source = w.source AND g.hour = w.hour
                 AND g.gpu_uuid = w.gpu_uuid AND g.mig_instance IS NOT DISTINCT FROM w.mig_instance
            WHERE w.pod IS NOT NULL AND g.resource_id IS NOT NULL AND {where}),
        kept AS (SELECT * FROM {kept}),
        resources AS (
            SELECT c."ResourceId" AS resource_id, any_value(c."ProviderName") AS provider_name,
                   any_value(c."x_InstanceType") AS instance_type, max(c."x_GpuCount") AS gpu_count,
                   mode(c."PricingCategory") AS pricing_category, arg_max(c."x_Team", c."ChargePeriodStart") AS owner_team
            FROM cost_line_items c WHERE c."ResourceId" IN (SELECT resource_id FROM kept)
              AND c."ChargeCategory" = 'Usage' GROUP BY 1)
        SELECT h.*, a.cost_usd, a.basis, coalesce(a.team, r.owner_team) AS team, coalesce(a.provider, r.provider_name) AS provider,
               r.instance_type, r.gpu_count, r.pricing_category
        FROM kept h
        LEFT JOIN alloc a ON a.hour = h.hour AND a.resource_id = h.resource_id AND a.gpu_uuid = h.gpu_uuid
             AND a.mig_instance IS NOT DISTINCT FROM h.mig_instance AND a.namespace IS NOT DISTINCT FROM h.namespace
             AND a.pod = h.pod AND a.container IS NOT DISTINCT FROM h.container
        LEFT JOIN resources r ON r.resource_id = h.resource_id
        ORDER BY h.resource_id, h.namespace, h.pod, h.gpu_uuid, h.mig_instance, h.hour""",
        params,
    )
