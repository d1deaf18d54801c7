"""The one period a dashboard page states (warehouse/windows.py's window model): a calendar month in UTC
or the last N days up to the newest data, picked once in the sidebar; every KPI and table of the page
uses it, and a month the window covers only in part is labelled so.

The default is the calendar month the newest cost data falls in, the month ``gpufinops costs``, the
API and the MCP tools answer for when no window is given.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from decimal import Decimal

import duckdb
import polars as pl
import streamlit as st

from gpufinops.dashboard import labels
from gpufinops.dashboard.common import cached_call, cached_query
from gpufinops.dashboard.precomputed import WINDOW_CHOICES
from gpufinops.warehouse import coverage, windows
from gpufinops.warehouse.queries.fragments import filters
from gpufinops.warehouse.windows import Window

LAST = "Last {n} days"


def months_with_data(con: duckdb.DuckDBPyConnection, teams: list[str] | None) -> list[datetime]:
    """The first day (UTC) of every month with cost data in scope, newest first: the daily rollup's and
    the shared-GPU allocation's (a team may carry only a share of shared GPUs), as ``latest_charge_day``."""
    where, params = filters(teams, None, None, team_col="d.team")
    where_alloc, alloc_params = filters(teams, None, None, team_col="a.team")
    rows = con.execute(
        f"SELECT DISTINCT date_trunc('month', d.day AT TIME ZONE 'UTC') FROM cost_daily d WHERE {where} "
        f"UNION SELECT DISTINCT date_trunc('month', a.hour AT TIME ZONE 'UTC') FROM gpu_allocation_hourly a "
        f"WHERE {where_alloc} ORDER BY 1 DESC",
        params + alloc_params,
    ).fetchall()
    return [windows.midnight(r[0]) for r in rows if r[0] is not None]


def of_page(
    con: duckdb.DuckDBPyConnection, key: str, teams: list[str] | None, empty: str
) -> tuple[datetime, Window] | None:
    """A page's newest cost day in ``teams``' scope and the period picked in its sidebar (widget ``key``);
    None: no cost data in scope, which the page says with ``empty``."""
    as_of = cached_query(con, "latest_charge_day", team=teams)
    if as_of is None:
        say_empty(con, teams, empty)
        return None
    return as_of, picker(key, cached_call(con, months_with_data, teams=teams), as_of)


def metrics_months(con: duckdb.DuckDBPyConnection, teams: list[str] | None) -> tuple[list[datetime], datetime | None]:
    """The first day (UTC) of every month with GPU metrics in scope, newest first, and the newest metric hour."""
    where, params = filters(teams, None, None, team_col="team", time_col="hour")
    rows = con.execute(
        f"SELECT DISTINCT date_trunc('month', hour AT TIME ZONE 'UTC'), max(hour) OVER () FROM gpu_metrics_hourly "
        f"WHERE {where} ORDER BY 1 DESC",
        params,
    ).fetchall()
    return [windows.midnight(r[0]) for r in rows], rows[0][1] if rows else None


def of_metrics(con: duckdb.DuckDBPyConnection, key: str, teams: list[str] | None) -> tuple[datetime, Window] | None:
    """Where no bill is loaded: the GPU metrics' newest day in scope and the period picked over the months
    they cover (utilisation needs no bill); None without GPU metrics in scope either. The months are read
    once per data version (a scan of the hourly metrics), as ``months_with_data`` is."""
    months, newest = cached_call(con, metrics_months, teams=teams)
    if newest is None:
        return None
    as_of = windows.midnight(newest)
    return as_of, picker(key, months, as_of)


def say_empty(con: duckdb.DuckDBPyConnection, teams: list[str] | None, empty: str) -> None:
    """A page with no cost data in scope says so; where GPU metrics are loaded and no bill is, it says what
    they cover and which source loads a bill instead (``warehouse.coverage.no_bill``), not "run ingest"."""
    why = cached_call(con, coverage.no_bill, team=teams)
    said = labels.config_words(why[:1].upper() + why[1:]).replace("gpufinops ingest", "`gpufinops ingest`")
    st.info(said if why else empty)


def choices(months: list[datetime], as_of: datetime) -> dict[str, Window]:
    """Label → window: each month with data (newest first), then the last N days up to ``as_of``'s day."""
    newest = default(as_of)
    found = {newest.label: newest} | {windows.month_of(m).label: windows.month_of(m) for m in months}
    found |= {LAST.format(n=n): windows.last_days(as_of, n) for n in WINDOW_CHOICES}
    return found


def default(as_of: datetime) -> Window:
    """The window a page opens on: the calendar month (UTC) of the newest data."""
    return windows.month_of(as_of)


def picker(key: str, months: list[datetime], as_of: datetime) -> Window:
    """The sidebar's period selector (a fixed list: no free text)."""
    options = choices(months, as_of)
    labels = list(options)
    first = default(as_of).label
    picked = st.sidebar.selectbox("Period", labels, index=labels.index(first) if first in labels else 0, key=key)
    return options[picked]


def query_end(window: Window, as_of: datetime | None) -> datetime | None:
    """The ``end`` a query gets: None where the window reaches past the newest data (the same rows, and the
    key the load job stored the pages' default queries under), else the window's end."""
    if window.end is None or as_of is None or window.end >= as_of + timedelta(days=1):
        return None
    return window.end


def days_back(window: Window, as_of: datetime) -> int:
    """How many days of history a page must load to hold the whole window (at least the default's)."""
    start = window.start or as_of
    return max(WINDOW_CHOICES[0], (windows.midnight(as_of) - start).days + 1)


def is_data_month(window: Window, as_of: datetime) -> bool:
    """Whether ``window`` is the calendar month of the newest data (the budget's and forecast's month)."""
    return window == windows.month_of(as_of)


def spend_in(spend, window: Window):
    """``spend`` (dashboard.spend.Spend) with its daily rows, its KPI totals and its anomalies cut to
    ``window`` (the forecast and the outlook stay the newest month's)."""
    from gpufinops.dashboard.common import total

    day = pl.col("day")
    kept = spend.daily.filter(day >= window.start) if window.start is not None else spend.daily
    kept = kept.filter(day < window.end) if window.end is not None else kept
    anomalies = spend.anomalies
    if anomalies is not None and "day" in anomalies.columns and anomalies.height:
        first = window.first_day or anomalies["day"].min()
        last = window.last_day or anomalies["day"].max()
        anomalies = anomalies.filter(pl.col("day").cast(pl.Date).is_between(first, last))
    return dataclasses.replace(
        spend,
        daily=kept,
        anomalies=anomalies,
        month_to_date=total(kept, "effective_cost"),
        gpu_month_to_date=total(kept, "gpu_cost"),
        allocated_gpu_month_to_date=total(kept, "allocated_gpu_cost") if kept.height else Decimal(0),
        unallocated_gpu_month_to_date=total(kept, "unallocated_gpu_cost") if kept.height else Decimal(0),
    )


def month_label(month: str, window: Window) -> str:
    """A ``YYYY-MM`` row label, with the part of the month ``window`` covers when it is not all of it."""
    return windows.period_label("month", month, window)


def kpi_period(window: Window, as_of: datetime) -> str:
    """How the KPIs name the window: "this month" for the newest data's month, else its short label."""
    return "this month" if is_data_month(window, as_of) else "in " + window.label.split(" (")[0]
