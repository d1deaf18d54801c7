"""One forecast of a period's cost: the one function every surface quotes (budgets and their alerts, the
demo summary, the weekly report, the dashboard, the API's alerts).

A (scope, period, as-of) gives one :class:`Outlook`:

* the period's **known days** (UTC days before the first day the cost data does not fully cover, as
  of ``now``) are actuals, summed exactly (DECIMAL) over every cost line of the scope, unattributed
  spend (lines without a team) included when the scope is every team;
* only the **unknown days** are forecast (``models.forecast.period_forecast``: the local-level model
  per (team, provider) series, its 80 % interval); the forecast is actual + forecast of the rest;
* a period whose days are all known is **complete**: its forecast is its actual and its interval has
  zero width.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import duckdb
import polars as pl

from gpufinops.models.budgets import BudgetScope

CENT = Decimal("0.01")


def _cents(value: Decimal | float) -> Decimal:
    return Decimal(str(value)).quantize(CENT, rounding=ROUND_HALF_UP)


@dataclass(frozen=True)
class Outlook:
    period_start: date
    period_end: date  # exclusive
    first_unknown_day: date  # the first day the data does not fully cover
    actual_usd: Decimal  # the period's known days, exact
    forecast_usd: Decimal  # actual + the forecast of the unknown days
    lower_usd: Decimal
    upper_usd: Decimal
    history_days: int  # days of history the forecast was fitted on (0: nothing left to forecast)

    @property
    def complete(self) -> bool:
        """Every day of the period is known: the forecast is the actual, the interval zero-width."""
        return self.first_unknown_day >= self.period_end

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (money as numbers): what the budget alerts' details and the API carry."""
        return {
            "forecast": float(self.forecast_usd),
            "lower": float(self.lower_usd),
            "upper": float(self.upper_usd),
            "actual_complete_days_usd": float(self.actual_usd),
            "complete": self.complete,
            "first_unknown_day": self.first_unknown_day.isoformat(),
            "history_days": self.history_days,
        }


def scope_series(
    con: duckdb.DuckDBPyConnection,
    scope: BudgetScope,
    *,
    now: datetime | None = None,
    edge: datetime | None = None,
    names: list[str] | None = None,
) -> pl.DataFrame:
    """The scope's daily cost per (team, provider), ``cost`` exact and ``cost_usd`` for the model, as of
    ``now`` (every line with any team, or none, when the scope is every team). ``names``: the warehouse's
    provider names when the caller already has them (the budget rule reads them once for every budget)."""
    from gpufinops.warehouse import alerts_queries as aq

    providers = None
    if scope.providers:
        providers = [n for n in (aq.provider_names(con) if names is None else names) if scope.matches_provider(n)]
    return aq.scope_daily_series(
        con,
        teams=list(scope.teams) or None,
        provider_names_=providers,
        gpu_models=list(scope.gpu_models) or None,
        tags=[(k, list(v)) for k, v in scope.tags] or None,
        before=now,
        complete_until=edge if edge is not None else aq.data_edge(con, now=now),
    )


def first_unknown_day(edge: datetime) -> date:
    """The first UTC day the data does not fully cover: the edge's day (the day after, at midnight)."""
    return edge.astimezone(UTC).date()


def period_outlook(
    con: duckdb.DuckDBPyConnection,
    scope: BudgetScope,
    period_start: date,
    period_end: date,
    *,
    now: datetime | None = None,
    edge: datetime | None = None,
    series: pl.DataFrame | None = None,
) -> Outlook | None:
    """The period's outlook for ``scope`` as of ``now`` (None: all the data); None without cost data.
    ``edge`` (``alerts_queries.data_edge``) and ``series`` (:func:`scope_series`) may be passed by a
    caller that has them already."""
    from gpufinops.models import forecast
    from gpufinops.warehouse import alerts_queries as aq

    edge = edge if edge is not None else aq.data_edge(con, now=now)
    if edge is None:
        return None
    series = series if series is not None else scope_series(con, scope, now=now, edge=edge)
    unknown = first_unknown_day(edge)
    known_days = series.filter((pl.col("day") >= period_start) & (pl.col("day") < min(unknown, period_end)))
    actual = _cents(known_days["cost"].sum() or 0) if not known_days.is_empty() else Decimal("0.00")
    if unknown >= period_end:
        return Outlook(period_start, period_end, unknown, actual, actual, actual, actual, 0)
    rows = forecast.period_forecast(
        con, period_start=period_start, period_end=period_end, as_of=unknown, daily=series.drop("cost")
    )
    if rows.is_empty():
        return None
    rest = rows.select(
        (pl.col(c) - pl.col("actual_to_date_usd")).sum().alias(c) for c in ("forecast_usd", "lower_usd", "upper_usd")
    ).row(0, named=True)
    return Outlook(
        period_start,
        period_end,
        unknown,
        actual,
        actual + _cents(rest["forecast_usd"]),
        actual + _cents(rest["lower_usd"]),
        actual + _cents(rest["upper_usd"]),
        int(rows["history_days"].max() or 0),
    )


def month_outlook(
    con: duckdb.DuckDBPyConnection,
    teams: list[str] | None,
    *,
    now: datetime | None = None,
    edge: datetime | None = None,
) -> Outlook | None:
    """The outlook of the month the newest cost data (as of ``now``) falls in, for ``teams`` (None: every
    team and the unattributed spend): the month the "all" budget watches, the dashboard and the report show.
    ``edge`` (``alerts_queries.data_edge`` as of ``now``) may be passed by a caller that has it already."""
    from gpufinops.models.budgets import period_bounds
    from gpufinops.warehouse import alerts_queries as aq

    edge = edge if edge is not None else aq.data_edge(con, now=now)
    if edge is None or (teams is not None and not teams):
        return None
    start, end, _ = period_bounds(data_day(edge), "month")
    return period_outlook(con, BudgetScope(teams=tuple(teams or ())), start, end, now=now, edge=edge)


def data_day(edge: datetime) -> date:
    """The day the newest cost data falls in (an edge at midnight ends the day before)."""
    return (edge.astimezone(UTC) - timedelta(microseconds=1)).date()
