"""Cost forecast (month-end and next month, per team and provider) and cost anomalies.

Each (team, provider) daily EffectiveCost series is fitted with a local-level model with a
multiplicative day-of-week profile (exponential smoothing, ETS(A,N,N) on the deseasonalised
series): GPU fleets bill the same machines every day, and notebooks and work-hours machines make
weekdays dearer than weekends. The day-of-week factors are medians of each day's ratio to its
centred 7-day mean (a level shift, a machine starting or stopping, does not bend them); the
smoothing weight is the one with the smallest one-step-ahead absolute error on the series itself.
The 80 % prediction interval of a sum of future days is the local-level model's exact variance of
that sum, with the day noise measured robustly (MAD of the one-step errors).

The model and its backtest are in ``models.forecast_fit``, the daily series in ``models.cost_series``,
the anomalies (days that leave the model's band) in ``models.anomalies``; this module re-exports their
public names, so ``models.forecast`` stays the one name of the forecast for its readers.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta

import duckdb
import polars as pl

from gpufinops.models.anomalies import ANOMALY_COLUMNS, cost_anomalies, series_anomalies
from gpufinops.models.cost_series import as_day, daily_series
from gpufinops.models.forecast_fit import (
    MAD_TO_SIGMA,
    Z80,
    ForecastParams,
    SeriesFit,
    backtest,
    dow_factors,
    fit_series,
    sum_interval_halfwidth,
)
from gpufinops.models.frames import as_date

__all__ = [
    "ANOMALY_COLUMNS",
    "FORECAST_COLUMNS",
    "MAD_TO_SIGMA",
    "Z80",
    "ForecastParams",
    "SeriesFit",
    "backtest",
    "cost_anomalies",
    "cost_forecast",
    "dow_factors",
    "fit_series",
    "period_forecast",
    "quality",
    "series_anomalies",
    "sum_interval_halfwidth",
]


def _month_start(d: date) -> date:
    return d.replace(day=1)


def _next_month(d: date) -> date:
    return (d.replace(day=28) + timedelta(days=4)).replace(day=1)


def cost_forecast(
    con: duckdb.DuckDBPyConnection,
    *,
    teams: list[str] | None = None,
    as_of: datetime | None = None,
    params: ForecastParams = ForecastParams(),
    daily: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Month-end and next-month cost per (team, provider), with an 80 % prediction interval.

    ``as_of`` (default: the day after the last day with cost data) splits known from forecast
    days: the month is ``as_of``'s month; days before it are actuals, the rest are forecast.
    If the data stops earlier than ``as_of``, the missing days are forecast too. ``daily``: a
    series to forecast instead of the warehouse's (see ``models.cost_series.daily_series``).
    """
    series = daily_series(con, teams, None, daily)
    if series.is_empty():
        return pl.DataFrame(schema=FORECAST_COLUMNS)
    day0 = as_day(as_of) if as_of is not None else as_date(series["day"].max()) + timedelta(days=1)
    month, next_month = _month_start(day0), _next_month(day0)
    return _window_forecasts(
        series, day0, [("month_end", month, next_month), ("next_month", next_month, _next_month(next_month))], params
    )


def period_forecast(
    con: duckdb.DuckDBPyConnection,
    *,
    period_start: date,
    period_end: date,
    as_of: datetime | date | None = None,
    teams: list[str] | None = None,
    params: ForecastParams = ForecastParams(),
    daily: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Cost of the calendar period [period_start, period_end) per (team, provider): the actual cost
    of its days before ``as_of`` plus the forecast of the rest, with the 80 % interval (horizon
    ``period_end``). For a month this is exactly ``cost_forecast``'s ``month_end`` row: the same
    fit, the same days, the same sum (budgets and the dashboard quote one number)."""
    series = daily_series(con, teams, None, daily)
    if series.is_empty():
        return pl.DataFrame(schema=FORECAST_COLUMNS)
    day0 = as_day(as_of) if as_of is not None else as_date(series["day"].max()) + timedelta(days=1)
    return _window_forecasts(series, day0, [("period_end", period_start, period_end)], params)


FORECAST_COLUMNS = {
    "month": pl.Date,
    "team": pl.Utf8,
    "provider": pl.Utf8,
    "horizon": pl.Utf8,
    "actual_to_date_usd": pl.Float64,
    "forecast_usd": pl.Float64,
    "lower_usd": pl.Float64,
    "upper_usd": pl.Float64,
    "history_days": pl.Int64,
}


def _window_forecasts(
    daily: pl.DataFrame, day0: date, windows: list[tuple[str, date, date]], params: ForecastParams
) -> pl.DataFrame:
    """For each (horizon, lo, hi) window and each series: the actual cost of the window's days
    before the first forecast day plus the forecast of its remaining days, with the interval."""
    data_end = as_date(daily["day"].max()) + timedelta(days=1)
    start = min(day0, data_end)  # first forecast day
    after = max(hi for _, _, hi in windows)
    rows = []
    for (team, provider), part in daily.filter(pl.col("day") < start).group_by("team", "provider", maintain_order=True):
        y, days = part["cost_usd"].to_numpy(), part["day"].to_list()
        if len(y) == 0:
            continue
        fit = fit_series(y, days, params)
        future = [start + timedelta(days=i) for i in range(max(0, (after - start).days))]
        preds = {d: max(0.0, fit.level * fit.factors[d.weekday()]) for d in future}
        for horizon, lo, hi in windows:
            known = float(part.filter((pl.col("day") >= lo) & (pl.col("day") < hi))["cost_usd"].sum())
            steps = [(d - start).days + 1 for d in future if lo <= d < hi]
            mean = sum(preds[start + timedelta(days=s - 1)] for s in steps)
            half = sum_interval_halfwidth(fit, steps)
            rows.append(
                {
                    "month": lo,
                    "team": team,
                    "provider": provider,
                    "horizon": horizon,
                    "actual_to_date_usd": known,
                    "forecast_usd": known + mean,
                    "lower_usd": known + max(0.0, mean - half),
                    "upper_usd": known + mean + half,
                    "history_days": fit.history_days,
                }
            )
    return pl.DataFrame(rows, schema=FORECAST_COLUMNS)


def quality(con: duckdb.DuckDBPyConnection, **kwargs) -> dict:
    """The cost forecast's backtest on the warehouse's own daily cost (e.g. the demo): model MAPE
    and the seasonal-naive baseline's, both reported."""
    result = backtest(daily_series(con, None, None), **kwargs)
    result["method"] = (
        "local level x day-of-week profile (exponential smoothing, smoothing weight fitted "
        "per series); baseline: same weekday of the last observed week"
    )
    return result
