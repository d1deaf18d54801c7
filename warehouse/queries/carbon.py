"""The one read model of ``carbon_hourly``: per month, team and resource (docs/carbon.md).

The CLI (``gpufinops carbon``), the API (``GET /v1/carbon``), the dashboard and the weekly report all
call :func:`carbon_summary`, so a figure is the same everywhere. GPU-hours without a power
measurement are counted (``withheld_gpu_hours``), never given emissions.
"""

from __future__ import annotations

from datetime import datetime

import duckdb
import polars as pl

from gpufinops.kernel.labels import NO_TEAM
from gpufinops.warehouse import coverage, windows
from gpufinops.warehouse.queries.fragments import filters, frame

BY = ("team", "resource", "month")
PERIODS = ("day", "week", "month")  # the rows' period: its first UTC day (a Monday for a week), or YYYY-MM
_KEYS = {
    "month": ["month"],
    "team": ["month", "team"],
    "resource": ["month", "team", "resource_id", "provider", "region"],
}


def carbon_summary(
    con: duckdb.DuckDBPyConnection,
    *,
    by: str = "team",
    team: str | list[str] | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    period: str = "month",
) -> pl.DataFrame:
    """Energy and emissions per ``by`` (team | resource | month) and UTC ``period`` in [start, end):
    a ``month`` column (``YYYY-MM``), or for ``day`` / ``week`` a ``day`` / ``week`` column holding
    the period's first day (ISO weeks start on Monday). ``by="month"`` is one row per period.

    ``kg_co2e_per_gpu_hour`` is over measured GPU-hours only; a GPU-hour of no team reads as the label table's
    team of none (``labels.NO_TEAM``, "(unattributed)"), as on every other surface."""
    if by not in BY:
        raise ValueError(f"by: must be one of {', '.join(BY)}, not {by!r}")
    where, params = filters(team, start, end, team_col="team", time_col="hour")
    if period not in PERIODS:
        raise ValueError(f"period: must be one of {', '.join(PERIODS)}, not {period[:40]!r}")
    keys = [period if k == "month" else k for k in _KEYS[by]]
    select_keys = ", ".join(
        {
            "month": "strftime(date_trunc('month', hour AT TIME ZONE 'UTC'), '%Y-%m') AS month",
            "week": "CAST(date_trunc('week', hour AT TIME ZONE 'UTC') AS DATE) AS week",
            "day": "CAST(hour AT TIME ZONE 'UTC' AS DATE) AS day",
            "team": f"coalesce(team, '{NO_TEAM}') AS team",
            "resource_id": "resource_id",
            "provider": "any_value(provider) AS provider",
            "region": "any_value(region) AS region",
        }[k]
        for k in keys
    )
    group = ", ".join(str(i + 1) for i, k in enumerate(keys) if k not in ("provider", "region"))
    sql = f"""
        SELECT {select_keys},
               sum(gpu_hours) AS gpu_hours,
               coalesce(sum(gpu_hours) FILTER (WHERE energy_basis = 'withheld'), 0) AS withheld_gpu_hours,
               sum(gpu_kwh) AS gpu_kwh, sum(node_kwh) AS node_kwh, sum(kwh) AS kwh, sum(kg_co2e) AS kg_co2e,
               sum(kg_co2e) / nullif(sum(gpu_hours) FILTER (WHERE energy_basis = 'measured'), 0)
                   AS kg_co2e_per_gpu_hour,
               sum(embodied_kg_co2e) AS embodied_kg_co2e,
               count(DISTINCT resource_id) FILTER (WHERE energy_basis = 'withheld') AS withheld_resources,
               count(DISTINCT CAST(hour AT TIME ZONE 'UTC' AS DATE)) FILTER (WHERE energy_basis = 'withheld')
                   AS withheld_days
        FROM carbon_hourly WHERE {where}
        GROUP BY {group} ORDER BY {", ".join(str(i + 1) for i in range(len(keys)))}"""
    return frame(con, sql, params)


def described(frame: pl.DataFrame, period: str, window: windows.Window) -> pl.DataFrame:
    """``carbon_summary``'s rows as a reader is given them (CLI, API, MCP): ``period_label`` names the row's
    period and, where the window cuts it, the days it covers (``2026-10 (03 – 05 Oct)``); ``emissions_coverage``
    says, where some of the row's GPU-hours had no power reading, that its emissions are unknown or partial,
    for how many GPU-hours, resources and days, and which source types would measure them (null: all measured)."""
    if frame.is_empty():
        return frame.with_columns(
            pl.lit(None, pl.Utf8).alias("period_label"), pl.lit(None, pl.Utf8).alias("emissions_coverage")
        )
    labels = [windows.period_label(period, value, window) for value in frame[period]]
    notes = [
        coverage.of_row(
            "emissions",
            row["gpu_hours"] or 0,
            row["withheld_gpu_hours"] or 0,
            row["withheld_resources"] or 0,
            row["withheld_days"] or 0,
        ).sentence()
        or None
        for row in frame.iter_rows(named=True)
    ]
    return frame.with_columns(
        pl.Series("period_label", labels, pl.Utf8), pl.Series("emissions_coverage", notes, pl.Utf8)
    )


def emissions_coverage(
    con: duckdb.DuckDBPyConnection,
    *,
    team: str | list[str] | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
) -> coverage.Coverage:
    """The emissions' coverage over the same GPU-hours the rows count (``carbon_hourly`` in the window)."""
    where, params = filters(team, start, end, team_col="team", time_col="hour")
    sql = f"""
        SELECT coalesce(sum(gpu_hours), 0),
               coalesce(sum(gpu_hours) FILTER (WHERE energy_basis = 'withheld'), 0),
               count(DISTINCT resource_id) FILTER (WHERE energy_basis = 'withheld'),
               count(DISTINCT CAST(hour AT TIME ZONE 'UTC' AS DATE)) FILTER (WHERE energy_basis = 'withheld')
        FROM carbon_hourly WHERE {where}"""
    total, withheld, resources, days = con.execute(sql, params).fetchall()[0]
    return coverage.of_row("emissions", float(total), float(withheld), int(resources), int(days))


def sources(
    con: duckdb.DuckDBPyConnection,
    *,
    team: str | list[str] | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
) -> pl.DataFrame:
    """Where the intensities and PUEs came from, with the energy each covers (the figures' footnote)."""
    where, params = filters(team, start, end, team_col="team", time_col="hour")
    sql = f"""
        SELECT region, intensity_source, any_value(grid_g_co2e_per_kwh) AS grid_g_co2e_per_kwh,
               any_value(pue) AS pue, any_value(pue_source) AS pue_source, any_value(node_basis) AS node_basis,
               sum(kwh) AS kwh
        FROM carbon_hourly WHERE {where} AND energy_basis = 'measured'
        GROUP BY 1, 2 ORDER BY kwh DESC NULLS LAST"""
    return frame(con, sql, params)
