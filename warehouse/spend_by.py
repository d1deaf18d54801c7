"""Spend for a window, grouped one way, with its total: the one figure ``gpufinops costs``,
``GET /v1/costs``, the MCP ``costs`` tool and the dashboard's Overview table all quote.

* ``team``, ``provider``, ``service``: as the teams carry the cost (shared GPUs charged by allocation),
  summed from :func:`warehouse.allocation_queries.team_spend_daily`, the builder the Overview's KPIs,
  the Team page and ``/v1/costs/daily`` read, so a team's October here is the dashboard's.
* ``resource``, ``gpu_model``: the line items as billed (a resource is one bill line's, never split);
  a lead's scope keeps the lines its teams are tagged with.
* ``namespace``: the GPU cost of *shared* GPUs only, as the allocation (``gpu_allocation_hourly``)
  charges it to the Kubernetes namespaces whose pods ran on them, with the idle capacity in a row of its
  own; spend on GPUs no workload metrics cover, and all non-GPU spend, has no namespace. The result
  says how much of the window's GPU spend that is (``covers``).

Money is DECIMAL, exact; the total is the sum of the rows, computed here once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal

import duckdb
import polars as pl

from gpufinops.kernel.labels import NO_TEAM
from gpufinops.warehouse import allocation_queries, windows
from gpufinops.warehouse.queries.fragments import GPU_USAGE, filters, frame
from gpufinops.warehouse.windows import Window

BY = ("team", "provider", "resource", "service", "gpu_model", "namespace")
COSTS = ("effective", "billed", "gpu")
COLUMN = {"effective": "effective_cost", "billed": "billed_cost", "gpu": "gpu_cost"}
NO_NAMESPACE = "(idle capacity, no namespace)"  # basis 'unallocated': shared GPUs no workload used
NO_VALUE = {"team": NO_TEAM, "provider": "(no provider)", "service": "(no service)"}
NO_VALUE |= {"resource": "(no resource)", "gpu_model": "(not a GPU)", "namespace": NO_NAMESPACE}


@dataclass(frozen=True)
class SpendBy:
    by: str
    cost: str
    window: Window
    rows: pl.DataFrame  # <by> (text), cost_usd (DECIMAL), share (of the total), largest first
    total_usd: Decimal
    covers: str | None  # what the figure covers, where that is less than all spend of the window
    unknown: str | None = None  # why an empty result is unknown rather than no spend (no bill loaded)


def window_for(
    con: duckdb.DuckDBPyConnection,
    month: str | None = None,
    first: date | datetime | None = None,
    last: date | datetime | None = None,
    teams: list[str] | None = None,
) -> Window:
    """The window asked for (a month, or from/to days), else the calendar month (UTC) of the newest
    cost data in scope: what every surface answers when no window is given."""
    if month is None and first is None and last is None:
        from gpufinops.warehouse import queries

        newest = queries.latest_charge_day(con, team=teams) or queries.latest_charge_day(con)
        if newest is None:  # GPU metrics alone: say what they cover and which source loads a bill
            from gpufinops.warehouse import coverage

            why = coverage.no_bill(con, team=teams) or "no cost data yet (run gpufinops ingest, or gpufinops demo)"
            raise windows.WindowError(why)
        return windows.month_of(newest)
    return windows.pick(month, first, last)


def spend_by(
    con: duckdb.DuckDBPyConnection,
    *,
    by: str,
    window: Window,
    cost: str = "effective",
    teams: list[str] | None = None,
) -> SpendBy:
    """``cost`` (effective, billed or GPU) spend in ``window`` per ``by`` value, for ``teams``."""
    if by not in BY:
        raise ValueError(f"by: must be one of {', '.join(BY)}, not {by[:40]!r}")
    if cost not in COSTS:
        raise ValueError(f"cost: must be one of {', '.join(COSTS)}, not {cost[:40]!r}")
    covers = None
    if by in ("team", "provider", "service"):
        daily = allocation_queries.team_spend_daily(con, team=teams, start=window.start, end=window.end)
        grouped = _group(daily, by, COLUMN[cost])
    elif by == "namespace":
        if cost == "billed":
            raise ValueError("cost: namespaces carry the allocated GPU cost only (use --cost gpu or effective)")
        grouped, covers = _namespaces(con, window, teams)
    else:
        grouped = _line_items(con, by, COLUMN[cost], window, teams)
    rows = grouped.with_columns(pl.col(by).fill_null(NO_VALUE[by]))
    rows = rows.group_by(by).agg(pl.col("cost_usd").sum()).sort(["cost_usd", by], descending=[True, False])
    total = sum((Decimal(str(v)) for v in rows["cost_usd"] if v is not None), Decimal(0))
    share = [float(Decimal(str(v)) / total) if total and v is not None else None for v in rows["cost_usd"]]
    rows = rows.with_columns(pl.Series("share", share, dtype=pl.Float64))
    unknown = None
    if rows.is_empty():  # nothing found: with GPU metrics and no bill, that is unknown, not "no spend"
        from gpufinops.warehouse import coverage

        unknown = coverage.no_bill(con, team=teams) or None
    return SpendBy(by, cost, window, rows, total, covers, unknown)


def _group(daily: pl.DataFrame, by: str, column: str) -> pl.DataFrame:
    schema = pl.Schema({by: pl.Utf8(), "cost_usd": pl.Decimal(38, 15)})
    if daily.is_empty():
        return pl.DataFrame(schema=schema)
    return daily.group_by(by).agg(pl.col(column).sum().alias("cost_usd")).cast(schema)


def _line_items(
    con: duckdb.DuckDBPyConnection, by: str, column: str, window: Window, teams: list[str] | None
) -> pl.DataFrame:
    key = {"resource": 'c."ResourceId"', "gpu_model": 'c."x_GpuModel"'}[by]
    value = {
        "effective_cost": 'sum(c."EffectiveCost")',
        "billed_cost": 'sum(c."BilledCost")',
        "gpu_cost": f'coalesce(sum(c."EffectiveCost") FILTER (WHERE {GPU_USAGE}), 0)',
    }[column]
    where, params = filters(teams, window.start, window.end)
    return frame(
        con,
        f"SELECT {key} AS {by}, CAST({value} AS DECIMAL(38, 15)) AS cost_usd "
        f"FROM cost_line_items c WHERE {where} GROUP BY 1",
        params,
    )


def _namespaces(con: duckdb.DuckDBPyConnection, window: Window, teams: list[str] | None) -> tuple[pl.DataFrame, str]:
    where, params = filters(teams, window.start, window.end, team_col="a.team", time_col="a.hour")
    rows = frame(
        con,
        f"""SELECT CASE WHEN a.basis = 'unallocated' THEN NULL ELSE a.namespace END AS namespace,
                   CAST(sum(a.cost_usd) AS DECIMAL(38, 15)) AS cost_usd
            FROM gpu_allocation_hourly a WHERE {where} GROUP BY 1""",
        params,
    )
    allocated = sum((Decimal(str(v)) for v in rows["cost_usd"] if v is not None), Decimal(0))
    daily = allocation_queries.team_spend_daily(con, team=teams, start=window.start, end=window.end)
    gpu_total = sum((Decimal(str(v)) for v in daily["gpu_cost"] if v is not None), Decimal(0)) if daily.height else 0
    covers = (
        f"namespaces: the GPU cost of shared GPUs as gpu_allocation_hourly charges it, "
        f"${allocated:,.2f} of ${gpu_total:,.2f} GPU spend in the window; the rest (GPUs no "
        "workload metrics cover) and all non-GPU spend have no namespace"
    )
    return rows, covers


def as_json(result: SpendBy) -> dict:
    """The result as the API, MCP and ``--format json`` give it: money as numbers (floats of the
    exact figures), the window stated, the total beside the rows."""
    return {
        "by": result.by,
        "cost": result.cost,
        "window": result.window.as_dict(),
        "currency": "USD",
        "rows": [
            {result.by: r[result.by], "cost_usd": float(r["cost_usd"]), "share": r["share"]}
            for r in result.rows.iter_rows(named=True)
        ],
        "total_usd": float(result.total_usd) if result.rows.height else None,  # nothing found is not $0
        "covers": result.unknown or (result.covers if result.rows.height else f"no spend in {result.window.label}"),
    }
