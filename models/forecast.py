"""Cost forecast (month-end and next month, per team and provider) and cost anomalies.

Each (team, provider) daily EffectiveCost series is fitted with a local-level model with a
multiplicative day-of-week profile (exponential smoothing, ETS(A,N,N) on the deseasonalised
series): GPU fleets bill the same machines every day, and notebooks and work-hours machines make
weekdays dearer than weekends. The day-of-week factors are medians of each day's ratio to its
centred 7-day mean (a level shift, a machine starting or stopping, does not bend them); the
smoothing weight is the one with the smallest one-step-ahead absolute error on the series itself.
The 80 % prediction interval of a sum of future days is the local-level model's exact variance of
that sum, with the day noise measured robustly (MAD of the one-step errors).

Anomalies are days whose cost leaves the one-step-ahead band (``anomaly_z`` robust sigmas, and a
floor in dollars). The level is updated with clipped values, so one spike does not move the
expectation; two out-of-band days of the same sign in a row are a level shift and reset it.
Each anomaly lists the line items (resource, service, SKU, description) whose cost moved most
against their mean of the week before.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import duckdb
import numpy as np
import polars as pl

from gpufinops.models.frames import as_date, as_datetime
from gpufinops.models.recommendation import provider_code
from gpufinops.warehouse import allocation_queries, queries

Z80 = 1.2815515655446004          # two-sided 80 % normal quantile
MAD_TO_SIGMA = 1.4826


@dataclass(frozen=True)
class ForecastParams:
    season_window_days: int = 56          # days of history the day-of-week factors are taken from
    alphas: tuple[float, ...] = (0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9)
    min_season_days: int = 14             # fewer days of history: no day-of-week profile
    anomaly_z: float = 4.0                # robust sigmas outside the expectation that make an anomaly
    anomaly_min_usd: float = 25.0         # and at least this many dollars away from it
    anomaly_min_share: float = 0.10       # and at least this share of the expectation
    top_line_items: int = 5
    baseline_days: int = 7                # line items are compared with their mean over these days
    min_sigma_share: float = 0.01         # floor of the day noise, as a share of the level


@dataclass
class SeriesFit:
    factors: np.ndarray       # 7 day-of-week factors (Monday first), mean 1
    alpha: float
    level: float              # level after the last observed day (deseasonalised $/day)
    sigma: float              # robust sd of one-step errors, $/day
    history_days: int


# ---- fitting ----------------------------------------------------------------------------------

def dow_factors(y: np.ndarray, dow: np.ndarray, params: ForecastParams = ForecastParams()) -> np.ndarray:
    """Median ratio of each weekday's cost to its centred 7-day mean, normalised to mean 1."""
    n = len(y)
    if n < params.min_season_days:
        return np.ones(7)
    lo = max(0, n - params.season_window_days)
    kernel = np.ones(7) / 7
    centred = np.convolve(y, kernel, mode="same")
    idx = np.arange(max(lo, 3), n - 3)           # only days with a full centred window
    ratios = np.where(centred[idx] > 0, y[idx] / np.where(centred[idx] > 0, centred[idx], 1), np.nan)
    factors = np.ones(7)
    for d in range(7):
        vals = ratios[(dow[idx] == d) & ~np.isnan(ratios)]
        if len(vals) >= 2:
            factors[d] = float(np.median(vals))
    factors = np.clip(factors, 0.0, None)
    mean = factors.mean()
    return factors / mean if mean > 0 else np.ones(7)


def _filter(x: np.ndarray, alpha: float, sigma: float | None = None, clip_z: float | None = None
            ) -> tuple[np.ndarray, float]:
    """One-step-ahead deseasonalised predictions and the final level. With ``clip_z`` the update
    uses clipped values and two same-sign breaches in a row reset the level (anomaly mode)."""
    level = float(np.mean(x[: min(7, len(x))]))
    preds = np.empty(len(x))
    streak_sign = 0
    streak: list[float] = []   # the values of the current run of same-sign breaches
    for t, value in enumerate(x):
        preds[t] = level
        err = value - level
        if clip_z is not None and sigma is not None and sigma > 0 and abs(err) > clip_z * sigma:
            sign = 1 if err > 0 else -1
            streak = streak + [value] if sign == streak_sign else [value]
            streak_sign = sign
            if len(streak) >= 2:
                level, streak_sign, streak = float(np.mean(streak)), 0, []
                continue
            err = sign * clip_z * sigma
        else:
            streak_sign, streak = 0, []
        level += alpha * err
    return preds, level


def fit_series(y: np.ndarray, days: list[date], params: ForecastParams = ForecastParams()) -> SeriesFit:
    """Fit the day-of-week profile and the smoothing weight to one daily series."""
    dow = np.array([d.weekday() for d in days])
    factors = dow_factors(y, dow, params)
    f = factors[dow]
    x = np.where(f > 0, y / np.where(f > 0, f, 1), y)
    warm = min(7, max(1, len(y) // 2))
    best_alpha, best_err = params.alphas[0], math.inf
    for alpha in params.alphas:
        preds, _ = _filter(x, alpha)
        err = float(np.mean(np.abs(y[warm:] - preds[warm:] * f[warm:]))) if len(y) > warm else 0.0
        if err < best_err * (1 - 1e-9):  # relative: a float-noise tie keeps the smaller weight (deterministic)
            best_alpha, best_err = alpha, err
    preds, level = _filter(x, best_alpha)
    resid = (y - preds * f)[warm:]
    sigma = MAD_TO_SIGMA * float(np.median(np.abs(resid - np.median(resid)))) if len(resid) >= 3 else 0.0
    if len(resid) < 3 or sigma == 0.0:
        sigma = max(sigma, float(np.std(resid)) if len(resid) >= 2 else 0.5 * abs(level))
    # a perfectly flat history does not make the future certain: at least 1 % of the level per day
    sigma = max(sigma, params.min_sigma_share * abs(level))
    return SeriesFit(factors, best_alpha, level, sigma, len(y))


def sum_interval_halfwidth(fit: SeriesFit, steps: list[int], z: float = Z80) -> float:
    """Half-width of the prediction interval of the sum over future days ``steps`` (1 = tomorrow)
    under the local-level model: error of day j = e_j + alpha * sum of e_i for i < j."""
    if not steps:
        return 0.0
    chosen = set(steps)
    coeffs = [(1.0 if i in chosen else 0.0) + fit.alpha * sum(1 for j in chosen if j > i)
              for i in range(1, max(steps) + 1)]
    return z * fit.sigma * math.sqrt(sum(c * c for c in coeffs))


# ---- series -------------------------------------------------------------------------------------

def _series(con: duckdb.DuckDBPyConnection, teams: list[str] | None, end: date | None,
            daily: pl.DataFrame | None = None) -> pl.DataFrame:
    """The (team, provider) daily series on a gapless grid; ``daily`` (the columns of
    ``allocation_queries.team_cost_series``: teams as they carry cost, shared GPUs by allocation) replaces
    the query, e.g. a budget's own scope of the cost lines."""
    daily = allocation_queries.team_cost_series(con, teams=teams) if daily is None else daily
    if daily.is_empty():
        return daily.with_columns(pl.lit(None, pl.Utf8).alias("provider"))
    daily = daily.with_columns(pl.col("provider_name").map_elements(provider_code, return_dtype=pl.Utf8)
                               .alias("provider"))
    complete_until = daily["complete_until"].max()
    if complete_until is not None:   # a day the data only partly covers (an export mid-day) is not a low day
        until = as_datetime(complete_until)
        daily = daily.filter(pl.col("day") < until.astimezone(UTC).date())
        if daily.is_empty():
            return daily.select("day", "team", "provider", "cost_usd")
    # rounded to micro-dollars: a parallel float sum's last bits differ run to run, and must not move the fit
    daily = daily.group_by("day", "team", "provider").agg(pl.col("cost_usd").sum().round(6))
    last = end or as_date(daily["day"].max())
    first = as_date(daily["day"].min())
    grid = pl.DataFrame({"day": pl.date_range(first, last, "1d", eager=True)})
    keys = daily.select("team", "provider").unique()
    # a day inside the data's span without lines for a series cost nothing on it; a series without a
    # team (unattributed spend) is matched too (nulls_equal): scope "all" forecasts every dollar
    return (keys.join(grid, how="cross").join(daily, on=["team", "provider", "day"], how="left", nulls_equal=True)
            .with_columns(pl.col("cost_usd").fill_null(0.0)).sort("team", "provider", "day", nulls_last=True))


def _month_start(d: date) -> date:
    return d.replace(day=1)


def _next_month(d: date) -> date:
    return (d.replace(day=28) + timedelta(days=4)).replace(day=1)


def cost_forecast(con: duckdb.DuckDBPyConnection, *, teams: list[str] | None = None,
                  as_of: datetime | None = None, params: ForecastParams = ForecastParams(),
                  daily: pl.DataFrame | None = None) -> pl.DataFrame:
    """Month-end and next-month cost per (team, provider), with an 80 % prediction interval.

    ``as_of`` (default: the day after the last day with cost data) splits known from forecast
    days: the month is ``as_of``'s month; days before it are actuals, the rest are forecast.
    If the data stops earlier than ``as_of``, the missing days are forecast too. ``daily``: a
    series to forecast instead of the warehouse's (see ``_series``).
    """
    series = _series(con, teams, None, daily)
    if series.is_empty():
        return pl.DataFrame(schema=FORECAST_COLUMNS)
    day0 = _as_date(as_of) if as_of is not None else as_date(series["day"].max()) + timedelta(days=1)
    month, next_month = _month_start(day0), _next_month(day0)
    return _window_forecasts(series, day0, [("month_end", month, next_month), ("next_month", next_month,
                                                                                _next_month(next_month))], params)


def period_forecast(con: duckdb.DuckDBPyConnection, *, period_start: date, period_end: date,
                    as_of: datetime | date | None = None, teams: list[str] | None = None,
                    params: ForecastParams = ForecastParams(), daily: pl.DataFrame | None = None) -> pl.DataFrame:
    """Cost of the calendar period [period_start, period_end) per (team, provider): the actual cost
    of its days before ``as_of`` plus the forecast of the rest, with the 80 % interval (horizon
    ``period_end``). For a month this is exactly ``cost_forecast``'s ``month_end`` row: the same
    fit, the same days, the same sum (budgets and the dashboard quote one number)."""
    series = _series(con, teams, None, daily)
    if series.is_empty():
        return pl.DataFrame(schema=FORECAST_COLUMNS)
    day0 = _as_date(as_of) if as_of is not None else as_date(series["day"].max()) + timedelta(days=1)
    return _window_forecasts(series, day0, [("period_end", period_start, period_end)], params)


FORECAST_COLUMNS = {"month": pl.Date, "team": pl.Utf8, "provider": pl.Utf8, "horizon": pl.Utf8,
                    "actual_to_date_usd": pl.Float64, "forecast_usd": pl.Float64, "lower_usd": pl.Float64,
                    "upper_usd": pl.Float64, "history_days": pl.Int64}


def _window_forecasts(daily: pl.DataFrame, day0: date, windows: list[tuple[str, date, date]],
                      params: ForecastParams) -> pl.DataFrame:
    """For each (horizon, lo, hi) window and each series: the actual cost of the window's days
    before the first forecast day plus the forecast of its remaining days, with the interval."""
    data_end = as_date(daily["day"].max()) + timedelta(days=1)
    start = min(day0, data_end)                     # first forecast day
    after = max(hi for _, _, hi in windows)
    rows = []
    for (team, provider), part in daily.filter(pl.col("day") < start).group_by(
            "team", "provider", maintain_order=True):
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
            rows.append({"month": lo, "team": team, "provider": provider, "horizon": horizon,
                         "actual_to_date_usd": known, "forecast_usd": known + mean,
                         "lower_usd": known + max(0.0, mean - half), "upper_usd": known + mean + half,
                         "history_days": fit.history_days})
    return pl.DataFrame(rows, schema=FORECAST_COLUMNS)


def _as_date(value: datetime | date) -> date:
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC)
        return value.date()
    return value


# ---- anomalies ----------------------------------------------------------------------------------

ANOMALY_COLUMNS = {"day": pl.Date, "team": pl.Utf8, "provider": pl.Utf8, "cost_usd": pl.Float64,
                   "expected_usd": pl.Float64, "lower_usd": pl.Float64, "upper_usd": pl.Float64,
                   "direction": pl.Utf8, "top_line_items": pl.Utf8}


def series_anomalies(y: np.ndarray, days: list[date], params: ForecastParams = ForecastParams()) -> list[dict]:
    """Out-of-band days of one series: (index, expected, lower, upper, direction)."""
    if len(y) < params.min_season_days:
        return []  # too short to know what is normal: no anomaly is claimed
    fit = fit_series(y, days, params)
    dow = np.array([d.weekday() for d in days])
    f = fit.factors[dow]
    x = np.where(f > 0, y / np.where(f > 0, f, 1), y)
    preds, _ = _filter(x, fit.alpha, fit.sigma, params.anomaly_z)
    out = []
    for t in range(7, len(y)):
        expected = preds[t] * f[t]
        band = max(params.anomaly_z * fit.sigma, params.anomaly_min_usd, params.anomaly_min_share * abs(expected))
        if abs(y[t] - expected) > band:
            out.append({"index": t, "expected_usd": expected, "lower_usd": max(0.0, expected - band),
                        "upper_usd": expected + band, "direction": "spike" if y[t] > expected else "drop"})
    return out


def cost_anomalies(con: duckdb.DuckDBPyConnection, *, teams: list[str] | None = None,
                   start: datetime | date | None = None, end: datetime | date | None = None,
                   params: ForecastParams = ForecastParams(), daily: pl.DataFrame | None = None) -> pl.DataFrame:
    """Days in [start, end) whose cost left the expected band, with the line items that moved.

    The whole history is used to learn what is normal; ``start``/``end`` only choose which days
    are reported.
    """
    daily = _series(con, teams, None, daily)
    if daily.is_empty():
        return pl.DataFrame(schema=ANOMALY_COLUMNS)
    lo = _as_date(start) if start is not None else date.min
    hi = _as_date(end) if end is not None else date.max
    found = []
    for (team, provider), part in daily.group_by("team", "provider", maintain_order=True):
        y, days = part["cost_usd"].to_numpy(), part["day"].to_list()
        for a in series_anomalies(y, days, params):
            day = days[a["index"]]
            if lo <= day < hi:
                found.append({"day": day, "team": team, "provider": provider, "cost_usd": float(y[a["index"]]),
                              **{k: a[k] for k in ("expected_usd", "lower_usd", "upper_usd", "direction")}})
    if not found:
        return pl.DataFrame(schema=ANOMALY_COLUMNS)
    items = _line_item_deltas(con, found, teams, params)
    for a in found:
        a["top_line_items"] = json.dumps(items.get((a["day"], a["team"], a["provider"], a["direction"]), []))
    return pl.DataFrame(found, schema=ANOMALY_COLUMNS).sort("day", "team", "provider", nulls_last=True)


def _line_item_deltas(con: duckdb.DuckDBPyConnection, found: list[dict], teams: list[str] | None,
                      params: ForecastParams) -> dict[tuple, list[dict]]:
    """Per anomaly, the line items whose cost moved most in its direction against their mean over
    the ``baseline_days`` before it (an item absent on a day cost 0 that day)."""
    first = min(a["day"] for a in found) - timedelta(days=params.baseline_days)
    last = max(a["day"] for a in found) + timedelta(days=1)
    to_ts = lambda d: datetime(d.year, d.month, d.day, tzinfo=UTC)  # noqa: E731
    lines = queries.daily_cost_by_line_item(con, teams=teams, start=to_ts(first), end=to_ts(last))
    lines = lines.with_columns(pl.col("provider_name").map_elements(provider_code, return_dtype=pl.Utf8)
                               .alias("provider"))
    keys = ["resource_id", "service", "sku_id", "charge_description"]
    out: dict[tuple, list[dict]] = {}
    for a in found:
        same = (pl.col("provider") == a["provider"]) & (
            pl.col("team").is_null() if a["team"] is None else pl.col("team") == a["team"])
        part = lines.filter(same)
        base_lo = a["day"] - timedelta(days=params.baseline_days)
        today = part.filter(pl.col("day") == a["day"]).group_by(keys).agg(pl.col("cost_usd").sum())
        before = (part.filter((pl.col("day") >= base_lo) & (pl.col("day") < a["day"])).group_by(keys)
                  .agg((pl.col("cost_usd").sum() / params.baseline_days).alias("baseline_usd")))
        moved = (today.join(before, on=keys, how="full", coalesce=True, nulls_equal=True)
                 .with_columns(pl.col("cost_usd").fill_null(0.0), pl.col("baseline_usd").fill_null(0.0))
                 .with_columns((pl.col("cost_usd") - pl.col("baseline_usd")).alias("delta_usd")))
        sign = 1 if a["direction"] == "spike" else -1
        floor = max(0.01, 0.01 * abs(a["cost_usd"] - a["expected_usd"]))  # ignore items that barely moved
        moved = moved.filter(pl.col("delta_usd") * sign >= floor).sort(pl.col("delta_usd") * sign, descending=True)
        out[(a["day"], a["team"], a["provider"], a["direction"])] = [
            {**{k: r[k] for k in keys}, "cost_usd": round(r["cost_usd"], 2),
             "baseline_usd": round(r["baseline_usd"], 2), "delta_usd": round(r["delta_usd"], 2)}
            for r in moved.head(params.top_line_items).iter_rows(named=True)]
    return out


# ---- quality --------------------------------------------------------------------------------------

def backtest(daily: pl.DataFrame, *, horizon_days: int = 7, min_history_days: int = 28, step_days: int = 7,
             min_actual_usd: float = 1.0, params: ForecastParams = ForecastParams()) -> dict:
    """Forecast ``horizon_days`` ahead from origins every ``step_days`` (each fit sees only days
    before its origin) and score against the actuals; the baseline is seasonal-naive (the same
    weekday of the last observed week). MAPE over (series, day) points with an actual of at least
    ``min_actual_usd``; WAPE (sum of absolute errors / sum of actuals) over the same points."""
    model_err, naive_err, actuals, points, origins = [], [], [], 0, set()
    for _, part in daily.group_by("team", "provider", maintain_order=True):
        y, days = part["cost_usd"].to_numpy(), part["day"].to_list()
        for origin in range(min_history_days, len(y) - horizon_days + 1, step_days):
            fit = fit_series(y[:origin], days[:origin], params)
            origins.add(days[origin])
            for h in range(horizon_days):
                t = origin + h
                if y[t] < min_actual_usd:
                    continue
                model = max(0.0, fit.level * fit.factors[days[t].weekday()])
                naive = y[origin - 7 + (h % 7)]
                model_err.append(abs(model - y[t]))
                naive_err.append(abs(naive - y[t]))
                actuals.append(y[t])
                points += 1
    if not points:
        raise ValueError(f"not enough history to backtest: need more than {min_history_days + horizon_days} days")
    act = np.array(actuals)
    return {"model_mape_pct": round(float(np.mean(np.array(model_err) / act)) * 100, 3),
            "seasonal_naive_mape_pct": round(float(np.mean(np.array(naive_err) / act)) * 100, 3),
            "model_wape_pct": round(float(np.sum(model_err) / act.sum()) * 100, 3),
            "seasonal_naive_wape_pct": round(float(np.sum(naive_err) / act.sum()) * 100, 3),
            "points": points, "origins": len(origins), "series": daily.select("team", "provider").unique().height,
            "horizon_days": horizon_days, "min_history_days": min_history_days}


def quality(con: duckdb.DuckDBPyConnection, **kwargs) -> dict:
    """The cost forecast's backtest on the warehouse's own daily cost (e.g. the demo): model MAPE
    and the seasonal-naive baseline's, both reported."""
    result = backtest(_series(con, None, None), **kwargs)
    result["method"] = ("local level x day-of-week profile (exponential smoothing, smoothing weight fitted "
                        "per series); baseline: same weekday of the last observed week")
    return result
