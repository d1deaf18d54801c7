"""The queries of the alert rules (models/alerts.py), the alert ledger and the views that list alerts.

Plain functions ``(con, filters) -> polars.DataFrame`` like ``warehouse.queries``: filters are bound
parameters. Budget spend is read from the ``cost_daily`` rollup (the numbers the dashboard shows),
except for a tag scope, which only the line items carry.
"""

from __future__ import annotations

from datetime import datetime

import duckdb
import polars as pl

from gpufinops.warehouse.queries.fragments import GPU_USAGE
from gpufinops.warehouse.queries.fragments import frame as _frame

SERIES_SCHEMA = pl.Schema(
    {
        "day": pl.Date(),
        "team": pl.Utf8(),
        "provider_name": pl.Utf8(),
        "cost_usd": pl.Float64(),
        "complete_until": pl.Datetime("us", "UTC"),
    }
)


def data_edge(con: duckdb.DuckDBPyConnection, *, now: datetime | None = None) -> datetime | None:
    """Where the cost data ends: the latest end of a line of a day or less (what the forecast calls
    ``complete_until``), among lines that started before ``now``."""
    # epoch arithmetic: subtracting TIMESTAMPTZ values goes through ICU, 15x slower on 10M lines here
    rows = con.execute(
        """
        SELECT make_timestamptz(max(epoch_us("ChargePeriodEnd")) FILTER (
                   WHERE epoch_us("ChargePeriodEnd") - epoch_us("ChargePeriodStart") <= 86400000000))
        FROM cost_line_items WHERE "ChargePeriodStart" < coalesce(?, 'infinity'::TIMESTAMPTZ)""",
        [now],
    ).fetchall()
    return rows[0][0]


def provider_names(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The ProviderName values the cost data holds (a budget's provider codes are matched to them)."""
    return [
        r[0]
        for r in con.execute(
            "SELECT DISTINCT provider FROM cost_daily WHERE provider IS NOT NULL ORDER BY 1"
        ).fetchall()
    ]


def _scope_clauses(teams, provider_names_, gpu_models, tags, *, line_items: bool) -> tuple[str, list]:
    team_col, provider_col, gpu_col = (
        ('"x_Team"', '"ProviderName"', '"x_GpuModel"') if line_items else ("team", "provider", "gpu_model")
    )
    clauses: list[str] = ["TRUE"]
    params: list[object] = []
    for column, values in ((team_col, teams), (provider_col, provider_names_), (gpu_col, gpu_models)):
        if values is not None:
            clauses.append(f"{column} IN (SELECT unnest(?::VARCHAR[]))")
            params.append(list(values))
    for key, values in tags or ():
        clauses.append('json_extract_string("Tags", ?) IN (SELECT unnest(?::VARCHAR[]))')
        params += ["$." + _json_key(key), list(values)]
    return " AND ".join(clauses), params


def _json_key(key: str) -> str:
    return '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'


def scope_daily_series(
    con: duckdb.DuckDBPyConnection,
    *,
    teams: list[str] | None = None,
    provider_names_: list[str] | None = None,
    gpu_models: list[str] | None = None,
    tags: list[tuple[str, list[str]]] | None = None,
    before: datetime | None = None,
    complete_until: datetime | None = None,
) -> pl.DataFrame:
    """Daily EffectiveCost per (team, provider) of a budget's scope, in the columns of
    ``allocation_queries.team_cost_series`` (what ``models.forecast`` fits), for days before ``before``.
    Without tags it reads the ``cost_daily`` rollup (exact DECIMAL sums, cast once), with tags the
    line items. ``complete_until`` is the data's edge (``data_edge``), the same on every row."""
    line_items = bool(tags)
    where, params = _scope_clauses(teams, provider_names_, gpu_models, tags, line_items=line_items)
    if line_items:
        sql = f"""
            SELECT DATE '1970-01-01' + CAST(epoch_us("ChargePeriodStart") // 86400000000 AS INTEGER) AS day,
                   "x_Team" AS team,
                   "ProviderName" AS provider_name, sum("EffectiveCost") AS cost,
                   CAST(sum("EffectiveCost") AS DOUBLE) AS cost_usd
            FROM cost_line_items WHERE {where} AND "ChargePeriodStart" < coalesce(?, 'infinity'::TIMESTAMPTZ)
            GROUP BY ALL ORDER BY team, provider_name, day"""
    else:
        sql = f"""
            SELECT CAST(timezone('UTC', day) AS DATE) AS day, team, provider AS provider_name,
                   sum(effective_cost) AS cost, CAST(sum(effective_cost) AS DOUBLE) AS cost_usd
            FROM cost_daily WHERE {where} AND day < coalesce(?, 'infinity'::TIMESTAMPTZ)
            GROUP BY ALL ORDER BY team, provider_name, day"""
    frame = _frame(con, sql, params + [before])
    return frame.with_columns(pl.lit(complete_until, pl.Datetime("us", "UTC")).alias("complete_until")).cast(
        SERIES_SCHEMA
    )  # `cost`: the exact DECIMAL sum; `cost_usd`: the same as DOUBLE, for the model


# idle-GPU burn: the rollups' fast path (the idle_gpu model reads every resource-hour)


def idle_runs(
    con: duckdb.DuckDBPyConnection,
    *,
    idle_util_pct: float,
    min_hours: int,
    now: datetime | None = None,
    max_lag_hours: int = 2,
) -> pl.DataFrame:
    """Per billed resource whose GPUs are idle right now: the current run of consecutive measured
    idle hours (every GPU's peak under ``idle_util_pct``; a missing hour ends a run: unknown is not
    idle), when it is at least ``min_hours`` long and its last hour is within ``max_lag_hours`` of
    the newest metrics hour (a resource that stopped reporting is not known to be burning). With its
    team, GPU model and count, and the cost of those hours from the line items: ``billed_usd`` over
    ``billed_hours``; ``rate_usd_per_hour`` is the resource's mean GPU cost per billed hour over its
    last 24 billed hours up to the run's end, to price the hours the bill does not hold yet."""
    return _frame(
        con,
        f"""
        WITH newest AS (
            SELECT max(hour) AS h FROM gpu_metrics_hourly
            WHERE resource_id IS NOT NULL AND hour <= coalesce(?, 'infinity'::TIMESTAMPTZ)),
        recent AS (
            SELECT resource_id, hour, max(util_max) AS util_max FROM gpu_metrics_hourly
            WHERE resource_id IS NOT NULL AND hour >= (SELECT h FROM newest) - to_hours(CAST(? AS BIGINT))
              AND hour <= (SELECT h FROM newest) GROUP BY 1, 2),
        candidates AS (  -- idle in its latest measured hour
            SELECT resource_id FROM recent GROUP BY 1 HAVING arg_max(util_max, hour) < ?),
        history AS (
            SELECT resource_id, epoch_us(hour) // 3600000000 AS hour_n, max(util_max) AS util_max,
                   any_value(team) AS team, any_value(gpu_model) AS gpu_model
            FROM gpu_metrics_hourly m SEMI JOIN candidates USING (resource_id)
            WHERE hour <= (SELECT h FROM newest) GROUP BY 1, 2),
        flagged AS (
            SELECT *, util_max < ? AS idle,
                   CASE WHEN lag(hour_n) OVER w = hour_n - 1 AND (lag(util_max) OVER w < ?) = (util_max < ?)
                        THEN 0 ELSE 1 END AS brk
            FROM history WINDOW w AS (PARTITION BY resource_id ORDER BY hour_n)),
        islands AS (
            SELECT *, sum(brk) OVER (PARTITION BY resource_id ORDER BY hour_n) AS island,
                   max(hour_n) OVER (PARTITION BY resource_id) AS last_n FROM flagged),
        runs AS (
            SELECT resource_id, min(hour_n) AS start_n, max(hour_n) AS end_n, count(*) AS hours,
                   arg_max(team, hour_n) AS team, any_value(gpu_model) AS gpu_model, max(util_max) AS util_max
            FROM islands WHERE idle GROUP BY resource_id, island HAVING max(hour_n) = any_value(last_n)
               AND count(*) >= ?),
        gpus AS (  -- how many GPUs report in the run's last hour (counted only for the runs: DISTINCT is dear)
            SELECT m.resource_id, count(DISTINCT m.gpu_uuid) AS gpus FROM gpu_metrics_hourly m
            JOIN runs r ON m.resource_id = r.resource_id AND m.hour = make_timestamptz(r.end_n * 3600000000)
            WHERE m.hour >= (SELECT h FROM newest) - to_hours(CAST(? AS BIGINT))
            GROUP BY 1),
        lines AS (
            SELECT c."ResourceId" AS resource_id, epoch_us(c."ChargePeriodStart") // 3600000000 AS hour_n,
                   any_value(c."ProviderName") AS provider_name, any_value(c."x_Team") AS bill_team,
                   any_value(c."x_InstanceType") AS instance_type, sum(c."EffectiveCost") AS cost
            FROM cost_line_items c
            WHERE c."ChargeCategory" = 'Usage' AND {GPU_USAGE}
              AND c."ResourceId" IN (SELECT resource_id FROM runs)
              AND c."ChargePeriodStart" >= make_timestamptz((SELECT min(start_n) FROM runs) * 3600000000 - 86400000000)
              AND c."ChargePeriodStart" <= make_timestamptz((SELECT max(end_n) FROM runs) * 3600000000)
            GROUP BY 1, 2),
        joined AS (
            SELECT r.resource_id, r.start_n, l.hour_n, l.cost, l.provider_name, l.bill_team, l.instance_type,
                   row_number() OVER (PARTITION BY r.resource_id ORDER BY l.hour_n DESC NULLS LAST) AS rn
            FROM runs r LEFT JOIN lines l ON l.resource_id = r.resource_id AND l.hour_n <= r.end_n),
        priced AS (
            SELECT resource_id, any_value(provider_name) AS provider_name, any_value(bill_team) AS bill_team,
                   any_value(instance_type) AS instance_type,
                   coalesce(sum(cost) FILTER (WHERE hour_n >= start_n), 0) AS billed_usd,
                   count(hour_n) FILTER (WHERE hour_n >= start_n) AS billed_hours,
                   avg(cost) FILTER (WHERE rn <= 24 AND hour_n IS NOT NULL) AS rate_usd_per_hour
            FROM joined GROUP BY 1)
        SELECT r.resource_id, coalesce(p.bill_team, r.team) AS team, p.provider_name, p.instance_type, r.gpu_model,
               g.gpus, r.util_max, make_timestamptz(r.start_n * 3600000000) AS run_start,
               make_timestamptz(r.end_n * 3600000000) AS run_end, r.hours, p.billed_usd, p.billed_hours,
               p.rate_usd_per_hour
        FROM runs r LEFT JOIN priced p USING (resource_id) LEFT JOIN gpus g USING (resource_id)
        ORDER BY r.resource_id""",
        [now, max_lag_hours, idle_util_pct, idle_util_pct, idle_util_pct, idle_util_pct, min_hours, max_lag_hours],
    )


# the alert ledger (warehouse/alerts_store.py writes it)


def _team_visibility(teams: list[str] | None) -> tuple[str, list]:
    """An alert is visible to a team-scoped reader when it concerns teams and all of them are the
    reader's (a budget over two teams holds both teams' spend); finance (None) sees every alert."""
    if teams is None:
        return "TRUE", []
    return "len(a.teams) > 0 AND list_has_all(?::VARCHAR[], a.teams)", [list(teams)]


def alerts(
    con: duckdb.DuckDBPyConnection,
    *,
    teams: list[str] | None = None,
    status: str | None = "open",
    rule: str | None = None,
) -> pl.DataFrame:
    """Alerts (open by default; ``status=None``: every state) visible to ``teams``: the most severe
    first, then the newest, a budget's highest threshold first."""
    where, params = _team_visibility(teams)
    if status is not None:
        where += " AND a.status = ?"
        params.append(status)
    if rule is not None:
        where += " AND a.rule = ?"
        params.append(rule)
    try:
        return _frame(
            con,
            f"""
            SELECT a.* FROM alerts a WHERE {where}
            ORDER BY CASE a.severity WHEN 'critical' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END, a.opened_at DESC,
                     a.scope, TRY_CAST(a.threshold AS DOUBLE) DESC NULLS LAST, a.alert_id""",
            params,
        )
    except duckdb.CatalogException:  # a warehouse older than the alert tables, read-only: no alerts yet
        from gpufinops.warehouse.notifications_schema import ALERTS

        return pl.DataFrame(ALERTS.empty_table())


def alert_rows(con: duckdb.DuckDBPyConnection, alert_ids: list[str]) -> pl.DataFrame:
    return _frame(
        con, "SELECT * FROM alerts WHERE alert_id IN (SELECT unnest(?::VARCHAR[])) ORDER BY alert_id", [list(alert_ids)]
    )


def pending_notifications(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Every delivery not yet done: one row per notification (its alerts as a list), oldest first;
    ``status`` is pending, failed (retried) or sending (a previous run died mid-delivery)."""
    return _frame(
        con,
        """
        SELECT notification_id, any_value(event) AS event, any_value(channel) AS channel,
               any_value(target) AS target, any_value(status) AS status, max(attempts) AS attempts,
               list(alert_id ORDER BY alert_id) AS alert_ids, min(created_at) AS created_at,
               max(updated_at) AS updated_at
        FROM alert_deliveries WHERE status IN ('pending', 'failed', 'sending')
        GROUP BY notification_id ORDER BY created_at, notification_id""",
    )


def delivery_status(con: duckdb.DuckDBPyConnection, *, alert_id: str | None = None) -> pl.DataFrame:
    where, params = ("alert_id = ?", [alert_id]) if alert_id else ("TRUE", [])
    return _frame(
        con,
        f"""
        SELECT alert_id, event, channel, target, status, attempts, message_id, http_status, error, sent_at
        FROM alert_deliveries WHERE {where} ORDER BY alert_id, event, channel, target""",
        params,
    )
