"""What the dashboard's pages read that is dear to compute, computed by the job that loads the data.

A page load must not fit a model or scan every raw row of a 10,000-GPU fleet. So every load job
(``gpufinops ingest``, ``serve``, ``demo``: ``jobs.ingest_run.run_configured``) calls :func:`refresh`
after its loads, which stores in the warehouse (``warehouse.stored_results``):

* the **spend fits** the Overview and the Team page show, for every team together and for each team
  alone: this month's outlook (``models.outlook.month_outlook``, the one number the budgets, the report
  and the API quote), the month-end and next-month forecast (``models.forecast.cost_forecast``) and the
  cost anomalies of the widest history window (``models.forecast.cost_anomalies``; a page keeps the days
  of its own window);
* the **heavy page queries** at the pages' defaults for a viewer of every team (:data:`STORED_QUERIES`:
  the GPU fleet page's scans of the hourly metrics, the Data-health GPU-count check).

Each is stored with the fingerprint of the data it was computed on; a page uses it only while that
fingerprint is current, and otherwise (an old warehouse, a load since, a lead's set of teams) computes
it itself, once per data version (Streamlit's cache). Nothing here imports Streamlit: the jobs call it.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, fields
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from gpufinops.warehouse import alerts_queries as aq
from gpufinops.warehouse import allocation_queries, db, queries, stored_results, windows

log = logging.getLogger("gpufinops.dashboard")

WINDOW_CHOICES = (14, 30, 90, 365)  # the pages' history windows (days); the anomalies are stored for the widest
DEFAULT_WINDOW_DAYS = 30
IDLE_UTIL_PCT = 5.0  # the GPU fleet page's idle threshold (peak utilisation %)
ALL = "*"  # the scope of every team (and the spend without one)


def month_bounds(day: datetime) -> tuple[datetime, datetime]:
    start = day.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    end = (start + timedelta(days=32)).replace(day=1)
    return start, end


def window_start(as_of: datetime, days: int) -> datetime:
    return (as_of - timedelta(days=days - 1)).replace(hour=0, minute=0, second=0, microsecond=0)


def spend_start(as_of: datetime, days: int) -> datetime:
    """The first day a spend page shows: its window, and always the whole month ``as_of`` falls in."""
    return min(window_start(as_of, days), month_bounds(as_of)[0])


def scope_key(teams: list[str] | None) -> str | None:
    """The stored scope of a viewer's teams: every team, or one team; None (not stored) for several."""
    if teams is None:
        return ALL
    return f"team:{teams[0]}" if len(teams) == 1 else None


# ---- the spend fits ----------------------------------------------------------------------------------


@dataclass
class SpendFits:
    outlook: Any  # models.outlook.Outlook | None
    forecast: pl.DataFrame
    anomalies: pl.DataFrame  # from spend_start(as_of, max(WINDOW_CHOICES)) to as_of's day


def compute_fits(
    con: duckdb.DuckDBPyConnection,
    teams: list[str] | None,
    as_of: datetime,
    start: datetime,
    *,
    edge: datetime | None = None,
    series: pl.DataFrame | None = None,
) -> SpendFits:
    """The outlook, forecast and anomalies (days from ``start`` to ``as_of``'s) of ``teams``, as the
    Overview and Team pages show them. ``edge`` and ``series`` (``team_cost_series`` of every team) may
    be passed by a caller computing many scopes: the result is the same."""
    from gpufinops.models.forecast import cost_anomalies, cost_forecast
    from gpufinops.models.outlook import month_outlook

    outlook = month_outlook(con, teams, edge=edge)
    # the forecast model's as_of is the first day not known yet (the outlook's, else the day after the data)
    first_unknown = outlook.first_unknown_day if outlook is not None else as_of + timedelta(days=1)
    daily = None
    if series is not None:
        daily = series if teams is None else series.filter(pl.col("team").is_in(teams))
    return SpendFits(
        outlook,
        cost_forecast(con, teams=teams, as_of=first_unknown, daily=daily),
        cost_anomalies(con, teams=teams, start=start, end=as_of + timedelta(days=1), daily=daily),
    )


def _outlook_frame(outlook: Any) -> pl.DataFrame:
    """An Outlook as one row (money as exact text); no row for None."""
    row = {} if outlook is None else {f.name: getattr(outlook, f.name) for f in fields(outlook)}
    return pl.DataFrame(
        [{k: str(v) if isinstance(v, Decimal) else v for k, v in row.items()}] if row else [],
        schema=_OUTLOOK_SCHEMA,
    )


_OUTLOOK_SCHEMA = {
    "period_start": pl.Date,
    "period_end": pl.Date,
    "first_unknown_day": pl.Date,
    "actual_usd": pl.Utf8,
    "forecast_usd": pl.Utf8,
    "lower_usd": pl.Utf8,
    "upper_usd": pl.Utf8,
    "history_days": pl.Int64,
}


def _outlook_from(frame: pl.DataFrame) -> Any:
    from gpufinops.models.outlook import Outlook

    if frame.is_empty():
        return None
    row = frame.row(0, named=True)
    return Outlook(**{k: Decimal(v) if k.endswith("_usd") else v for k, v in row.items()})


def stored_fits(
    con: duckdb.DuckDBPyConnection, teams: list[str] | None, as_of: datetime, start: datetime
) -> SpendFits | None:
    """The stored fits of ``teams``, the anomalies cut to the page's days; None when not stored for the
    data the warehouse holds now (the caller computes them)."""
    scope = scope_key(teams)
    if scope is None:
        return None
    version = stored_results.data_version(con)
    parts = {name: stored_results.read(con, name, scope, version) for name in ("outlook", "forecast", "anomalies")}
    outlook, forecast, anomalies = parts["outlook"], parts["forecast"], parts["anomalies"]
    if outlook is None or forecast is None or anomalies is None:
        return None
    days = (pl.col("day") >= _day(start)) & (pl.col("day") < _day(as_of + timedelta(days=1)))
    return SpendFits(_outlook_from(outlook), forecast, anomalies.filter(days))


def _day(value: datetime) -> date:
    return value.astimezone(UTC).date() if value.tzinfo else value.date()


# ---- the heavy page queries ----------------------------------------------------------------------------

# ``warehouse.queries`` functions a page reads through ``dashboard.common.cached_query`` that are stored for
# the pages' default arguments (every team, the default window); other arguments are computed live.
STORED_QUERIES = frozenset(
    {"fleet_utilisation", "idle_gpu_cost", "unattributed_gpu_hours", "gpu_hours_attribution", "gpu_count_disagreements"}
)


def query_key(kwargs: dict[str, Any]) -> str:
    """The stored scope of a query's arguments (times as UTC ISO text, whatever the process's zone)."""

    def plain(value: Any) -> Any:
        if isinstance(value, datetime):
            return value.astimezone(UTC).isoformat() if value.tzinfo else value.isoformat()
        return str(value) if isinstance(value, date | Decimal) else value

    return "query:" + json.dumps({k: plain(v) for k, v in kwargs.items()}, sort_keys=True)


def default_queries(con: duckdb.DuckDBPyConnection) -> list[tuple[str, dict[str, Any]]]:
    """The stored queries with the arguments the pages pass a viewer of every team by default."""
    found: list[tuple[str, dict[str, Any]]] = [("gpu_count_disagreements", {})]
    as_of = queries.latest_charge_day(con, team=None)
    if as_of is not None:
        start = windows.month_of(as_of).start  # the pages' default period (dashboard/period.py)
        found += [
            ("fleet_utilisation", {"team": None, "start": start}),
            ("idle_gpu_cost", {"team": None, "start": start, "idle_util_pct": IDLE_UTIL_PCT}),
            ("unattributed_gpu_hours", {"start": start}),
            ("gpu_hours_attribution", {"start": start}),
        ]
    return found


def stored_query(con: duckdb.DuckDBPyConnection, name: str, kwargs: dict[str, Any]) -> pl.DataFrame | None:
    """The stored result of ``queries.<name>(con, **kwargs)`` on the data held now, or None."""
    if name not in STORED_QUERIES:
        return None
    return stored_results.read(con, name, query_key(kwargs), stored_results.data_version(con))


# ---- the job's side -------------------------------------------------------------------------------------


def compute_all(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], pl.DataFrame]:
    """Every stored result, on the data ``con`` holds: the fits of every team together and of each team,
    and the default page queries."""
    results: dict[tuple[str, str], pl.DataFrame] = {}
    try:
        import gpufinops.models.forecast  # noqa: F401  (an optional model: without it, no fits)
    except ImportError:
        fits_available = False
    else:
        fits_available = True
    if fits_available:
        edge = aq.data_edge(con)
        series = allocation_queries.team_cost_series(con, teams=None)
        for teams in [None, *([t] for t in queries.cost_teams(con, team=None))]:
            as_of = queries.latest_charge_day(con, team=teams)
            scope = scope_key(teams)
            if as_of is None or scope is None:
                continue
            fits = compute_fits(con, teams, as_of, spend_start(as_of, max(WINDOW_CHOICES)), edge=edge, series=series)
            results[("outlook", scope)] = _outlook_frame(fits.outlook)
            results[("forecast", scope)] = fits.forecast
            results[("anomalies", scope)] = fits.anomalies
    for name, kwargs in default_queries(con):
        results[(name, query_key(kwargs))] = getattr(queries, name)(con, **kwargs)
    return results


def refresh(warehouse: str | Path, *, memory_limit: str | None = None) -> float:
    """Recompute and store every result on the warehouse's data (what a load job calls after its loads);
    the seconds it took. One writer connection: the results and their data version are read and
    written in it, so a load cannot slip between them."""
    started = time.perf_counter()
    kwargs = {"memory_limit": memory_limit} if memory_limit else {}
    with db.writer(Path(warehouse), **kwargs) as con:
        version = stored_results.data_version(con)
        results = compute_all(con)
        stored_results.write(con, version, results, time.perf_counter() - started)
    seconds = time.perf_counter() - started
    log.info("stored %d dashboard result(s) in %.2f s", len(results), seconds)
    return seconds
